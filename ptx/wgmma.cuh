// wgmma synchronization (PTX ISA 9.7.15.6-9.7.15.8) and the 64-bit shared-memory matrix
// descriptor (9.7.15.5.1.2). The mma_async instructions themselves are in wgmma_mma.cuh.
#pragma once

#include <stdint.h>

#include "ptx/wgmma_mma.cuh"

namespace fa3::ptx {

// wgmma.fence: orders this warpgroup's register accesses before the wgmma that follows.
// Needed before the first wgmma and whenever ordinary code touched its registers.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most N committed wgmma groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins a register so the compiler cannot move its reads/writes across a fence, commit or
// wait: the asynchronous wgmma reads and writes accumulators behind the compiler's back.
__device__ __forceinline__ void pin_register(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void pin_register(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// The swizzle field of the descriptor (bits 62-63). Its order is NOT TMA's
// (CU_TENSOR_MAP_SWIZZLE_*): keep the two enums apart.
enum class DescSwizzle : uint64_t { None = 0, B128 = 1, B64 = 2, B32 = 3 };

// Shared-memory matrix descriptor. Addresses and offsets are in bytes, 16-byte aligned.
//   K-major, 128B swizzle: rows of 128 bytes, SBO = 1024 (between 8-row groups), LBO unused.
//   MN-major, 128B swizzle: LBO = bytes between 128-byte column blocks along MN,
//                           SBO = bytes between 8-row groups along K.
// base offset (bits 49-51) stays 0: every swizzled tile is 1024-byte aligned.
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes,
                                                   uint32_t sbo_bytes, DescSwizzle swizzle) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr & 0x3ffff) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3ffff) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3ffff) >> 4) << 32;
  desc |= static_cast<uint64_t>(swizzle) << 62;
  return desc;
}

// The descriptor of smem_addr + bytes, from that of smem_addr: the start address field (bits
// 0-13) is the address / 16, and shared addresses stay below 2^18, so the sum cannot carry
// into the next field. With bytes known at compile time this is one add per wgmma instead of
// the mask, shift and or of a fresh descriptor.
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xffffffff00000000ull) | lo;
}

}  // namespace fa3::ptx
