// Division by a divisor fixed at launch, as one multiply-high, one add and one shift.
//
// A kernel divides the tile index by launch constants (query blocks, heads, the L2 group)
// at the start of every tile. By a run-time int, nvcc emits ~20 instructions per division
// (float reciprocal, two corrections); on short causal problems a tile is only a few key
// blocks long, and that code is a visible part of it (the tile-entry block was 4.7% of the
// issued instructions of d64 causal 1k; measured on an H100, multiply-high instead of division
// made d64 causal 2-4% and d128 causal 1-2% faster at 512-2k).
//
// The method is Granlund and Montgomery's ("Division by invariant integers using
// multiplication", 1994, Fig. 4.1, N = 32): with l = ceil(log2 d) and
// m = floor(2^32 (2^l - d) / d) + 1, n / d = (mulhi(m, n) + n) >> l for every n < 2^32.
// Here n < 2^31, so mulhi(m, n) + n (< 2^31 + 2^31) cannot overflow 32 bits.
//
// Host and device share this header: the runtime builds the divisors, the kernels divide,
// and the CPU tests check the host twin of the device arithmetic.
#pragma once

#include <stdint.h>

namespace fa3 {

struct FastDivisor {
  uint32_t divisor;     // d, 1 <= d < 2^31
  uint32_t multiplier;  // m
  uint32_t shift;       // l
};

// The divisor for d (1 <= d < 2^31; the runtime checks its dimensions before).
inline FastDivisor make_fast_divisor(uint32_t d) {
  uint32_t l = 0;
  while (l < 31 && (uint32_t{1} << l) < d) ++l;
  const uint64_t m = (((uint64_t{1} << l) - d) << 32) / d + 1;
  return FastDivisor{d, static_cast<uint32_t>(m), l};
}

#if defined(__CUDACC__)
#define FA3_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FA3_HOST_DEVICE inline
#endif

// floor(n / d) for 0 <= n < 2^31.
FA3_HOST_DEVICE uint32_t fast_div(uint32_t n, const FastDivisor& d) {
#if defined(__CUDA_ARCH__)
  const uint32_t hi = __umulhi(n, d.multiplier);
#else
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * d.multiplier) >> 32);
#endif
  return (hi + n) >> d.shift;
}

// The quotient and remainder of n / d for 0 <= n < 2^31.
struct QuotRem {
  int quot, rem;
};
FA3_HOST_DEVICE QuotRem fast_divmod(int n, const FastDivisor& d) {
  const int q = static_cast<int>(fast_div(static_cast<uint32_t>(n), d));
  return QuotRem{q, n - q * static_cast<int>(d.divisor)};
}

#undef FA3_HOST_DEVICE

}  // namespace fa3
