// Arithmetic and conversions of the softmax and of the P operand, as single PTX instructions
// (or a fixed idiom of two or three).
#pragma once

#include <stdint.h>

namespace fa3::ptx {

// 2^x on the multi-function unit (MUFU.EX2). ex2.approx(-inf) = +0.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// log2(x) on the multi-function unit (MUFU.LG2): absolute error about 2^-22; lg2(+0) =
// -inf. The accurate log2f is a ~40-instruction polynomial with a dependent chain, run
// once per row and tile in the epilogue: at short sequences that showed up in profiles.
__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 1/x on the multi-function unit (MUFU.RCP), within 1 ulp; the IEEE division adds a
// Newton step and a branch to a slow path.
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Packs two floats into f16x2 / bf16x2 (round to nearest even): `lo` goes to bits 0-15.
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Packs four floats into four e4m3 bytes (byte i from b_i), rounded to nearest even and
// saturated to +-448 (.satfinite: e4m3 has no infinity, and P~ or a scaled input beyond the
// range must not become NaN). A fixed 3-instruction idiom: cvt.rn.satfinite.e4m3x2.f32 puts
// its FIRST source in the UPPER byte (PTX ISA, Conversion: cvt), hence the swapped operands; the
// two 16-bit halves are then joined with one mov.
__device__ __forceinline__ uint32_t pack_e4m3x4(float b0, float b1, float b2, float b3) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(b0), "f"(b1), "f"(b2), "f"(b3));
  return r;
}

// Byte permute (PTX ISA, Data Movement: prmt.b32): byte i of the result is byte s_i of the 8-byte
// value {b, a} (a = bytes 0-3, b = bytes 4-7), s_i the i-th hex digit of Selector from the
// right. 0x5410 joins the low halves of a and b; 0x6420 / 0x7531 interleave the even / odd
// bytes of a and b (the FP8 V transpose).
template <uint32_t Selector>
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "n"(Selector));
  return r;
}

// An f16 (its 16 bits) as a float (exact).
__device__ __forceinline__ float f16_to_f32(uint16_t bits) {
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(bits));
  return f;
}
// A bf16 (its 16 bits) as a float (exact: the float's upper half).
__device__ __forceinline__ float bf16_to_f32(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Generic -> shared-window address (what descriptors, TMA and mbarriers take).
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 32-bit load from shared memory by shared-window address.
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t value;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(value) : "r"(addr) : "memory");
  return value;
}

// Two floats from shared memory (8-byte aligned address), in one load.
__device__ __forceinline__ float2 ld_shared_v2_f32(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}

// ld_shared_v2_f32 at addr + kOffset bytes, the offset in the instruction (an address add
// that the compiler turns into an OR cannot be folded into the load).
template <int kOffset>
__device__ __forceinline__ float2 ld_shared_v2_f32(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2+%3];\n"
               : "=f"(v.x), "=f"(v.y)
               : "r"(addr), "n"(kOffset)
               : "memory");
  return v;
}

// Four 32-bit words from shared memory (16-byte aligned address), in one load.
__device__ __forceinline__ uint4 ld_shared_v4_u32(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Four 32-bit words to shared memory (16-byte aligned address), in one store.
__device__ __forceinline__ void st_shared_v4_u32(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// Two 32-bit words to shared memory (8-byte aligned address), in one store.
__device__ __forceinline__ void st_shared_v2_u32(uint32_t addr, uint32_t x, uint32_t y) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};\n" ::"r"(addr), "r"(x), "r"(y) : "memory");
}

// 32-bit store to shared memory by shared-window address.
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}

}  // namespace fa3::ptx
