// Host-side random inputs: normal(0, 1) values rounded to fp16/bf16, generated once and
// reused by every problem of a run (a problem takes Q, K and V from consecutive slices).
// Pure host code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "options.h"

namespace fa3bench {

// n values ~ normal(0, 1) as 16-bit bit patterns of `dtype`, never zero (a value that rounds
// to zero is drawn again). Deterministic in `seed`; a longer request extends a shorter one
// (same seed, same prefix), so a grown pool keeps the values it had.
std::vector<uint16_t> random_normal_16bit(size_t n, DType dtype, uint64_t seed);

// One pool per dtype, grown on demand.
class HostInputPool {
 public:
  // At least n values of `dtype`; valid until the next call.
  const uint16_t* values(DType dtype, size_t n);

 private:
  std::vector<uint16_t> pools_[2];
};

// The exact float values of n 16-bit values of `dtype`, for the host reference.
std::vector<float> to_float(const uint16_t* values, size_t n, DType dtype);

}  // namespace fa3bench
