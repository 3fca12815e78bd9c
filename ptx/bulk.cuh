// Non-tensor bulk copies of the copy engine (PTX ISA, Data Movement: cp.async.bulk and
// cp.reduce.async.bulk): a run of contiguous bytes, no tensor map. ONE THREAD issues each.
// Sizes are multiples of 16 bytes, both addresses 16-byte aligned.
//   global -> shared completes on an mbarrier (transaction bytes, like a TMA load);
//   shared -> global (copy or reduce-add) completes through the bulk groups of tma.cuh
//   (bulk_commit_group, then bulk_wait_group_read before reusing the shared source,
//   bulk_wait_group before publishing the global result).
// A shared source written by ordinary stores needs fence_proxy_async_shared by the writers and
// a barrier before the copy is issued.
#pragma once

#include <stdint.h>

#include "ptx/tma.cuh"

namespace fa3::ptx {

// Copies `bytes` from global memory into this CTA's shared memory at `dst`; the bytes count
// as transactions on mbarrier `bar` (arrive_expect_tx them first). The backward's per-row
// vectors (L_i and D_i = rowsum(dO_i * O_i) of a query block, paper Algorithm 3 line 20)
// come in this way with Q_i and dO_i, on the same barrier.
__device__ __forceinline__ void bulk_copy_global_to_shared(uint32_t dst, const void* src,
                                                           uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
      : "memory");
}

// Copies `bytes` from shared memory at `src` to global memory.
__device__ __forceinline__ void bulk_copy_shared_to_global(void* dst, uint32_t src,
                                                           uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(
                   reinterpret_cast<uint64_t>(dst)),
               "r"(src), "r"(bytes)
               : "memory");
}

// bulk_copy_shared_to_global with an L2 eviction policy (tma.cuh l2_policy_*) for the lines
// it writes: a query block's first dQ part in the backward (ordered adds, or the first
// stores of the _fs kernels), stored rather than added (no zeroed accumulator needed), kept in
// L2 for the next K/V blocks' adds.
__device__ __forceinline__ void bulk_copy_shared_to_global_hinted(void* dst, uint32_t src,
                                                                  uint32_t bytes, uint64_t policy) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;\n" ::"l"(
                   reinterpret_cast<uint64_t>(dst)),
               "r"(src), "r"(bytes), "l"(policy)
               : "memory");
}

// dst[i] += src[i] for the bytes / 4 floats at `src` in shared memory, each add atomic in L2
// (no lost updates between CTAs, order unspecified). The kernels use the _hinted form below;
// this one is the layer tests'.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   reinterpret_cast<uint64_t>(dst)),
               "r"(src), "r"(bytes)
               : "memory");
}

// bulk_reduce_add_f32 with an L2 eviction policy (tma.cuh l2_policy_*) for the lines it
// touches. The backward's dQ: every K/V block's CTA adds its partial dQ of a query block into
// one fp32 accumulator in the workspace (paper Algorithm 3 line 33), issued by the dQ-writer
// warp so the consumers do not wait on it; evict_last keeps the accumulator in L2 for the next
// K/V block's adds.
__device__ __forceinline__ void bulk_reduce_add_f32_hinted(float* dst, uint32_t src, uint32_t bytes,
                                                           uint64_t policy) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.add.f32"
      " [%0], [%1], %2, %3;\n" ::"l"(reinterpret_cast<uint64_t>(dst)),
      "r"(src), "r"(bytes), "l"(policy)
      : "memory");
}

}  // namespace fa3::ptx
