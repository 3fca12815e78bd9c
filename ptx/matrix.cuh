// ldmatrix / stmatrix (PTX ISA, Warp-level matrix instructions: ldmatrix, stmatrix): a warp
// moves one, two or four 8 x 8 matrices of 16-bit elements between shared memory and
// registers in the mma fragment layout. Every function here is WARP-COLLECTIVE (.sync.aligned):
// all 32 lanes execute it with the same qualifiers, converged.
//
// Addresses: lane 8 m + j gives the shared address of row j of matrix m (16 contiguous bytes,
// 16-byte aligned; rows may lie anywhere, so a swizzled tile is read row by row). With x1 only
// lanes 0-7 give addresses, with x2 lanes 0-15; the others' are ignored.
// Fragment: register m of lane l holds matrix m's elements (row l/4, cols 2(l%4), 2(l%4)+1),
// the lower column in bits 0-15. With .trans the matrix is transposed on the way: register m
// of lane l holds (rows 2(l%4), 2(l%4)+1, col l/4) of the matrix in memory.
// This is the layout of one 8-column group of a wgmma accumulator (rows 0-7 or 8-15 of a
// warp's 16) and of one quarter of a 16-bit wgmma A operand, which is why a warp can store an
// accumulator or load an A operand with them, one 16 x 16 block per x4.
// stmatrix needs sm_90; ldmatrix exists since sm_75.
#pragma once

#include <stdint.h>

namespace fa3::ptx {

__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// Transposing loads: what reads a tile stored with M (or N) contiguous as the K-contiguous
// fragments an mma wants (an A operand of A = T^T; the FP8 V transpose, paper 3.3).
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// Stores: a shared-memory operand written with these is read by wgmma or TMA only after
// fence_proxy_async_shared (tma.cuh) by the writers and a barrier.
__device__ __forceinline__ void stmatrix_x1(uint32_t addr, const uint32_t (&r)[1]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n" ::"r"(addr), "r"(r[0])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x2(uint32_t addr, const uint32_t (&r)[2]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// Transposing stores: an accumulator written as its transpose (P^T, dS^T with the queries
// contiguous), or the second half of the FP8 V transpose.
__device__ __forceinline__ void stmatrix_x1_trans(uint32_t addr, const uint32_t (&r)[1]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n" ::"r"(addr), "r"(r[0])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x2_trans(uint32_t addr, const uint32_t (&r)[2]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}

}  // namespace fa3::ptx
