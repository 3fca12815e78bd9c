#include "gpu_env.h"

#include <cstdlib>
#include <stdexcept>

#include "support/half.h"

namespace fa3test {

int test_device() {
  const char* s = std::getenv("FA3_TEST_DEVICE");
  return s && *s ? std::atoi(s) : 0;
}

bool hopper_gpu_available(std::string* reason) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *reason = std::string("no usable CUDA driver or device (cudaGetDeviceCount: ") +
              cudaGetErrorString(e) + ")";
    return false;
  }
  const int dev = test_device();
  if (dev < 0 || dev >= count) {
    *reason = "test device " + std::to_string(dev) + " does not exist (" + std::to_string(count) +
              " CUDA device(s))";
    return false;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, dev);
  if (prop.major != 9 || prop.minor != 0) {
    *reason = "device " + std::to_string(dev) + " is " + prop.name + " (sm_" +
              std::to_string(prop.major) + std::to_string(prop.minor) +
              "); fa3 runs only on Hopper (sm_90)";
    return false;
  }
  cudaSetDevice(dev);
  return true;
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  cuda_check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  cuda_check(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy to device");
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  cuda_check(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost),
             "cudaMemcpy to host");
}

void DeviceBuffer::poison() { cuda_check(cudaMemset(ptr_, 0xff, bytes_), "cudaMemset"); }

std::vector<uint16_t> random_16bit(size_t n, bool is_bf16, std::mt19937_64& rng,
                                   std::vector<float>* values, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint16_t> bits(n);
  if (values) values->resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = to_16bit(dist(rng), is_bf16);
    if (values) (*values)[i] = from_16bit(bits[i], is_bf16);
  }
  return bits;
}

}  // namespace fa3test
