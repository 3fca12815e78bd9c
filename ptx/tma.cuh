// TMA: bulk tensor copies between global and shared memory (PTX ISA 9.7.9.25-9.7.9.27).
// Tensor maps are CUtensorMap objects passed by value as __grid_constant__ kernel parameters;
// coordinates are element indices, innermost first.
#pragma once

#include <stdint.h>

namespace fa3::ptx {

__device__ __forceinline__ void prefetch_tensormap(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Loads a 4-D box into shared memory; completion is counted in bytes on mbarrier `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// An L2 eviction priority for every line an access with the policy touches (createpolicy,
// fraction 1.0), for the .L2::cache_hint forms below. evict_first: data used once (Q, O), so
// that it does not push out data read again; evict_last: data many CTAs read again (K, V).
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// tma_load_4d with an L2 eviction policy (l2_policy_*) for the lines it reads.
__device__ __forceinline__ void tma_load_4d_hinted(uint32_t dst, const void* map, uint32_t bar,
                                                   uint64_t policy, int32_t c0, int32_t c1,
                                                   int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "l"(policy), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
}

// Loads a 4-D box into the shared memory of every CTA of the cluster named in `cta_mask`
// (bit r: rank r), at the same offset `dst` in each; each CTA's barrier at offset `bar`
// counts the bytes that land in that CTA.
__device__ __forceinline__ void tma_load_4d_multicast(uint32_t dst, const void* map, uint32_t bar,
                                                      uint16_t cta_mask, int32_t c0, int32_t c1,
                                                      int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
}

// Pulls a 4-D box into L2 ahead of its load: no shared memory, no barrier, nothing to wait
// for (a hint; parts outside the tensor are ignored).
__device__ __forceinline__ void tma_prefetch_l2_4d(const void* map, int32_t c0, int32_t c1,
                                                   int32_t c2, int32_t c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// Stores a 4-D box from shared memory; parts of the box outside the tensor are not written.
__device__ __forceinline__ void tma_store_4d(const void* map, uint32_t src, int32_t c0,
                                             int32_t c1, int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// tma_store_4d with an L2 eviction policy (l2_policy_*) for the lines it writes.
__device__ __forceinline__ void tma_store_4d_hinted(const void* map, uint32_t src, uint64_t policy,
                                                    int32_t c0, int32_t c1, int32_t c2,
                                                    int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group.L2::cache_hint"
      " [%0, {%3, %4, %5, %6}], [%1], %2;\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(src), "l"(policy), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Reduce-adds a 4-D box of fp32 from shared memory into the tensor (dst = dst + src, element
// by element, each add atomic in L2); parts of the box outside the tensor are skipped, so a
// tail block needs no padded destination. The shared-memory box has the map's layout (its
// swizzle included), like a store's. One thread issues it; bulk_group completion.
// (PTX ISA, Data Movement: cp.reduce.async.bulk.tensor.)
__device__ __forceinline__ void tma_reduce_add_4d(const void* map, uint32_t src, int32_t c0,
                                                  int32_t c1, int32_t c2, int32_t c3) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
      " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until at most N bulk groups still READ their shared-memory source (the smem may
// then be reused or the CTA may exit; the global writes may still be in flight).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Waits until at most N bulk groups are pending at all: their global writes (or reduce-adds)
// are then performed and visible to this thread, so a release that follows (semaphore.cuh),
// after fence_proxy_async_global, publishes them. The .read form above only frees the
// shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Orders global memory between this thread's async proxy and its generic proxy, both ways:
// its completed async-proxy writes (a bulk reduce-add it waited for with bulk_wait_group)
// before its later generic operations, such as the release that lets another CTA read the
// result (the backward's ordered dQ adds); and what its generic operations saw (an acquire of
// another CTA's release) before its later bulk operations, such as a reduce-add onto the store
// that release published.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// Orders this thread's ordinary shared-memory writes before later async-proxy accesses
// (TMA store, wgmma operand reads) of the same bytes. Follow with a barrier.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace fa3::ptx
