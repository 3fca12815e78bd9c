// Arithmetic the softmax needs, as single PTX instructions.
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

// 32-bit store to shared memory by shared-window address.
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}

}  // namespace fa3::ptx
