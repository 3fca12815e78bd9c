// fp16 / bf16 <-> float conversions on the host (round to nearest even), for tests and
// benchmarks. No CUDA headers: these run on machines without a GPU.
#pragma once

#include <cstdint>
#include <cstring>

namespace fa3test {

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);        // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);       // overflow -> inf
  if (abs < 0x38800000u) {                                                     // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);                 // < half of min subnormal
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // value = mant24 * 2^(e-150) = m * 2^-24
    const uint32_t rounded = (mant + ((1u << (shift - 1)) - 1) + ((mant >> shift) & 1u)) >> shift;
    return static_cast<uint16_t>(sign | rounded);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    const float m = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -m : m;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Rounds a float to the nearest value of the 16-bit type (is_bf16 ? bf16 : fp16).
inline float round_to_16bit(float f, bool is_bf16) {
  return is_bf16 ? bf16_to_float(float_to_bf16(f)) : half_to_float(float_to_half(f));
}
inline uint16_t to_16bit(float f, bool is_bf16) { return is_bf16 ? float_to_bf16(f) : float_to_half(f); }
inline float from_16bit(uint16_t h, bool is_bf16) { return is_bf16 ? bf16_to_float(h) : half_to_float(h); }

}  // namespace fa3test
