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
  // Fills with 0xFF bytes: NaN for fp16, bf16 and fp32. Returns once the fill is done: it runs
  // on the legacy default stream, which a non-blocking stream's work does not wait for, so a
  // call launched there next could otherwise run before the fill, or under it (a poisoned
  // workspace's tile counter filled after the preprocess zeroed it: docs/perf-history.md v83).
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

// e4m3 (FP8: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities, 0x7f and
// 0xff are NaN, the largest finite value is 448) on the host.
float e4m3_to_float(uint8_t bits);
// Rounds to the nearest e4m3 value (ties to the even code) and saturates to +-448: what
// cvt.rn.satfinite.e4m3x2.f32 does.
uint8_t float_to_e4m3(float x);
inline float round_to_e4m3(float x) { return e4m3_to_float(float_to_e4m3(x)); }
// Normal(0, stddev) values rounded to e4m3; returns the bytes and (in *values) their values.
std::vector<uint8_t> random_e4m3(size_t n, std::mt19937_64& rng, std::vector<float>* values,
                                 float stddev = 1.0f);

}  // namespace fa3test
