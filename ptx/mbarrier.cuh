// mbarrier: shared-memory transaction barriers (PTX ISA 9.7.13.15).
#pragma once

#include <stdint.h>

namespace fa3::ptx {

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrival_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrival_count) : "memory");
}

// Makes initialized barriers visible to the async proxy (TMA) and the rest of the cluster.
// Follow it with a CTA barrier (a cluster barrier when other CTAs of the cluster arrive or
// multicast to them) before any thread uses the barriers.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrives on a barrier of any CTA of the cluster (a shared::cluster address from mapa), with
// the default .release.cta semantics. Enough for handing back a stage whose readers were
// wgmma (their reads completed at wait_group) to a TMA write: .release.cluster would put a
// MEMBAR.ALL.GPU before every arrival (measured: the 2-CTA kernels ran at half speed).
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}

// Arrives and announces `bytes` of TMA transactions that must land before the phase completes.
// The count must be exact: out-of-bounds box parts are zero-filled and still counted.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

// True once the phase with this parity has completed. A fresh barrier reports parity 1 as
// completed (the "previous" phase), which is how producers start on empty stages.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// try_wait with a time limit of the caller's: a thread whose phase has not completed may be
// suspended until it completes or about `suspend_ns` nanoseconds have passed, where the plain
// form returns after a short system-defined limit.
__device__ __forceinline__ bool mbarrier_try_wait_parity_for(uint32_t bar, uint32_t parity,
                                                             uint32_t suspend_ns) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity), "r"(suspend_ns)
      : "memory");
  return done != 0;
}

}  // namespace fa3::ptx
