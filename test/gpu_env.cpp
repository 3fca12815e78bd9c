#include "gpu_env.h"

#include <cmath>
#include <cstdlib>
#include <limits>
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

void DeviceBuffer::poison() {
  cuda_check(cudaMemset(ptr_, 0xff, bytes_), "cudaMemset");
  cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaMemset (waiting for it)");
}

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

float e4m3_to_float(uint8_t bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return (bits & 0x80) ? -magnitude : magnitude;
}

uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  // The nearest of the 127 non-negative finite codes (their values increase with the code),
  // ties to the even code: brute force, plain to check against the PTX ISA's words.
  static const std::vector<float> values = [] {
    std::vector<float> v(0x7f);
    for (int code = 0; code < 0x7f; ++code) v[code] = e4m3_to_float(static_cast<uint8_t>(code));
    return v;
  }();
  int best = 0;
  for (int code = 1; code < 0x7f; ++code) {
    const float d_best = std::fabs(values[best] - a), d = std::fabs(values[code] - a);
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  return static_cast<uint8_t>(sign | best);
}

std::vector<uint8_t> random_e4m3(size_t n, std::mt19937_64& rng, std::vector<float>* values,
                                 float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint8_t> bits(n);
  if (values) values->resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = float_to_e4m3(dist(rng));
    if (values) (*values)[i] = e4m3_to_float(bits[i]);
  }
  return bits;
}

}  // namespace fa3test
