// The GPU side of the tests: whether a Hopper GPU is here, device buffers, random inputs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fa3test {

// True when the CUDA driver loads and device 0 (or $FA3_TEST_DEVICE) is sm_90; otherwise
// *reason says why not, in one sentence.
bool hopper_gpu_available(std::string* reason);
int test_device();

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  // Fills with 0xFF bytes: NaN for fp16, bf16 and fp32.
  void poison();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Throws std::runtime_error naming the call when a CUDA runtime call fails.
void cuda_check(cudaError_t e, const char* what);

// Normal(0, 1) values rounded to the 16-bit type; returns the raw bits and (in *values) the
// exact float values.
std::vector<uint16_t> random_16bit(size_t n, bool is_bf16, std::mt19937_64& rng,
                                   std::vector<float>* values, float stddev = 1.0f);

}  // namespace fa3test
