#include "cuda_util.h"

namespace fa3bench {

Outcome cuda_outcome(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Outcome::success();
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next problem starts clean
    return Outcome::failure("out of memory (" + what + ")");
  }
  return Outcome::failure(what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e),
                          /*fatal=*/true);
}

Outcome fa3_outcome(fa3_status s, const std::string& what) {
  if (s == FA3_OK) return Outcome::success();
  std::string detail = fa3_last_error();
  if (detail.empty()) detail = fa3_status_string(s);
  Outcome o = Outcome::failure(what + ": " + detail, /*fatal=*/s == FA3_ERR_CUDA);
  o.unsupported = s == FA3_ERR_UNSUPPORTED;
  return o;
}

DeviceBuffer::~DeviceBuffer() { release(); }

Outcome DeviceBuffer::allocate(size_t bytes, const std::string& what) {
  release();
  void* p = nullptr;
  const Outcome o = cuda_outcome(cudaMalloc(&p, bytes), "cudaMalloc " + what);
  if (!o.ok) return o;
  data_ = p;
  bytes_ = bytes;
  return o;
}

void DeviceBuffer::release() {
  if (data_) cudaFree(data_);  // a failure here means the context is already dead; nothing to do
  data_ = nullptr;
  bytes_ = 0;
}

size_t free_device_memory() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_bytes;
}

}  // namespace fa3bench
