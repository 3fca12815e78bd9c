#include "inputs.h"

#include <algorithm>
#include <cmath>

#include "support/half.h"
#include "support/reference.h"

namespace fa3bench {

namespace {

constexpr size_t kChunk = size_t{1} << 20;  // values per independently seeded chunk

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log() below stays finite.
double uniform_open(uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// Box-Muller: one normal(0, 1) sample per call (the second of each pair is dropped for
// simplicity; generation is far from the bottleneck).
float normal_sample(uint64_t& state) {
  const double u1 = uniform_open(state), u2 = uniform_open(state);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

void fill_chunk(uint16_t* out, size_t count, DType dtype, uint64_t seed, size_t chunk) {
  uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (chunk + 1));
  const bool is_bf16 = dtype == DType::BF16;
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    do {
      bits = fa3test::to_16bit(normal_sample(state), is_bf16);
    } while ((bits & 0x7fffu) == 0);  // +0 or -0: inputs are never zeros
    out[i] = bits;
  }
}

}  // namespace

std::vector<uint16_t> random_normal_16bit(size_t n, DType dtype, uint64_t seed) {
  std::vector<uint16_t> values(n);
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
  fa3test::parallel_for(chunks, [&](int64_t c) {
    const size_t begin = static_cast<size_t>(c) * kChunk;
    fill_chunk(values.data() + begin, std::min(kChunk, n - begin), dtype, seed,
               static_cast<size_t>(c));
  });
  return values;
}

const uint16_t* HostInputPool::values(DType dtype, size_t n) {
  std::vector<uint16_t>& pool = pools_[dtype == DType::BF16 ? 1 : 0];
  if (pool.size() < n) pool = random_normal_16bit(n, dtype, /*seed=*/20240711);
  return pool.data();
}

std::vector<float> to_float(const uint16_t* values, size_t n, DType dtype) {
  std::vector<float> out(n);
  const bool is_bf16 = dtype == DType::BF16;
  for (size_t i = 0; i < n; ++i) out[i] = fa3test::from_16bit(values[i], is_bf16);
  return out;
}

}  // namespace fa3bench
