// How the bench handles CUDA and fa3 failures: every call's status becomes an Outcome that
// says what failed and whether the CUDA context may be dead (then the sweep stops), plus
// owning wrappers so no error path leaks device memory or events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "fa3/fa3.h"

namespace fa3bench {

struct Outcome {
  bool ok = true;
  bool fatal = false;  // the CUDA context may be unusable: stop the sweep
  bool unsupported = false;  // fa3 said FA3_ERR_UNSUPPORTED (kernel does not fit)
  std::string reason;

  static Outcome success() { return {}; }
  static Outcome failure(std::string reason, bool fatal = false) {
    Outcome o;
    o.ok = false;
    o.fatal = fatal;
    o.reason = std::move(reason);
    return o;
  }
};

// cudaSuccess -> success. Out of memory -> a failure of this problem only (the error is
// cleared). Anything else -> fatal: kernel faults are sticky and poison the context.
Outcome cuda_outcome(cudaError_t e, const std::string& what);
// FA3_OK -> success. FA3_ERR_CUDA -> fatal. Others -> a failure of this row, with
// fa3_last_error()'s sentence.
Outcome fa3_outcome(fa3_status s, const std::string& what);

// cudaMalloc'ed bytes, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Outcome allocate(size_t bytes, const std::string& what);
  void release();
  char* data() const { return static_cast<char*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory that cudaMemGetInfo reports free, 0 when it fails.
size_t free_device_memory();

}  // namespace fa3bench
