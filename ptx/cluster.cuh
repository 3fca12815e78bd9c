// Thread-block clusters (PTX ISA 9.7.13.2 barrier.cluster, 9.7.9.20 mapa, special registers
// %cluster_ctarank): the CTAs of a cluster run at once on neighbouring SMs and can address
// each other's shared memory.
#pragma once

#include <stdint.h>

namespace fa3::ptx {

// This CTA's rank in its cluster, 0 .. cluster size - 1.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every CTA of the cluster arrives (releasing its prior writes, mbarrier
// inits included) and then waits for all of them (acquiring theirs). Not .aligned: the
// threads of a warp may reach it apart.
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// The shared::cluster address of the variable at shared::cta address `addr` in the CTA of
// rank `rank` (this CTA's own rank gives its own variable, addressed cluster-wide).
__device__ __forceinline__ uint32_t mapa_shared_cluster(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

}  // namespace fa3::ptx
