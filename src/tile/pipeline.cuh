// The s-stage circular shared-memory buffer between a TMA producer and wgmma consumers
// (paper Algorithm 1 line 1). Each stage has a "full" mbarrier (one producer arrival plus the
// TMA transaction bytes) and an "empty" mbarrier (one arrival per consumer warp, or per
// consumer thread: init's count).
// In a cluster of Cluster CTAs whose producers multicast their share of each stage into every
// CTA, a stage may be refilled only once the consumers of every CTA released it: each
// consumer arrives on the empty barrier of every CTA of the cluster.
#pragma once

#include <stdint.h>

#include "ptx/cluster.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/semaphore.cuh"

#if FA3_DEBUG_HANG
#include <stdio.h>
#endif

namespace fa3::tile {

// A wait by a thread with nothing else to do, expected to last (a producer waiting for a
// stage, a Q buffer or the next draw): each try may suspend it up to this long, and it still
// resumes as soon as the phase completes. The plain try returns after a short limit: in
// v15's profile of d64 causal 1k the Q warp's draw_go loop polled every ~20 cycles (8% of all
// issued instructions), on an SM sub-partition whose consumer warps' softmax is issue-bound.
// Measured against the plain try on an H100: -0.1 to +0.8% at 1k and 8k, noise;
// 20 us instead of 1 us no better.
constexpr uint32_t kIdleSuspendNs = 1000;

// Waits for the phase of `parity` of mbarrier `bar`; suspend_ns: 0 for the plain try_wait,
// else its time limit per try. Debug builds (make DEBUG=1) give up after ~2^34 cycles with a
// message and a trap instead of hanging the GPU forever.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity,
                                              uint32_t suspend_ns = 0) {
  auto try_wait = [&] {
    return suspend_ns == 0 ? ptx::mbarrier_try_wait_parity(bar, parity)
                           : ptx::mbarrier_try_wait_parity_for(bar, parity, suspend_ns);
  };
#if FA3_DEBUG_HANG
  const long long start = clock64();
  while (!try_wait()) {
    if (clock64() - start > (1ll << 34)) {
      printf("fa3: mbarrier wait timed out (block %d, thread %d, barrier smem 0x%x, parity %u)\n",
             blockIdx.x, threadIdx.x, bar, parity);
      __trap();
    }
  }
#else
  while (!try_wait()) {
  }
#endif
}

// Waits until the global counter's bits under `mask` read `value` (acquire, GPU scope: what
// its writer released before raising it is visible after); returns the whole word it read
// last. Polls back to back. Debug builds give up after ~2^34 cycles with a message and a
// trap.
__device__ __forceinline__ int32_t wait_counter_masked(const int32_t* counter, int32_t mask,
                                                       int32_t value) {
  int32_t seen;
#if FA3_DEBUG_HANG
  const long long start = clock64();
  while (((seen = ptx::ld_acquire_gpu(counter)) & mask) != value) {
    if (clock64() - start > (1ll << 34)) {
      printf("fa3: counter wait timed out (block %d %d %d, thread %d, waiting for %x under "
             "mask %x)\n",
             blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, value, mask);
      __trap();
    }
  }
#else
  while (((seen = ptx::ld_acquire_gpu(counter)) & mask) != value) {
  }
#endif
  return seen;
}

// Until the counter reads `value`: the backward's deterministic dQ order.
__device__ __forceinline__ void wait_counter_equals(const int32_t* counter, int32_t value) {
  wait_counter_masked(counter, ~0, value);
}

// Until the counter has all of `bits` set: the first store's ready bit (_fs).
__device__ __forceinline__ void wait_counter_bits(const int32_t* counter, int32_t bits) {
  wait_counter_masked(counter, bits, bits);
}

__device__ __forceinline__ void mbarrier_wait_idle(uint32_t bar, uint32_t parity) {
  mbarrier_wait(bar, parity, kIdleSuspendNs);
}

// Stage index and phase bit, advanced together: the phase flips when the index wraps.
template <int Stages>
struct PipelineState {
  uint32_t index = 0;
  uint32_t phase = 0;
  // The state after `steps` advances from the start.
  __device__ static __forceinline__ PipelineState at(uint32_t steps) {
    PipelineState st;
    st.index = steps % Stages;
    st.phase = (steps / Stages) & 1;
    return st;
  }
  __device__ __forceinline__ void advance() {
    if (++index == Stages) {
      index = 0;
      phase ^= 1;
    }
  }
};

template <int Stages, int Cluster = 1>
struct TmaPipeline {
  uint32_t full_bars;   // smem address of Stages consecutive mbarriers
  uint32_t empty_bars;  // smem address of Stages consecutive mbarriers

  __device__ __forceinline__ uint32_t full(uint32_t stage) const { return full_bars + 8 * stage; }
  __device__ __forceinline__ uint32_t empty(uint32_t stage) const { return empty_bars + 8 * stage; }

  // One thread, before the CTA (cluster) barrier that publishes the barriers;
  // consumer_arrivals: of one CTA, the consumer_release calls that free a stage (the forward:
  // one lane per consumer warp; the backward: every consumer thread, after its own reads).
  __device__ __forceinline__ void init(uint32_t consumer_arrivals) const {
    for (int s = 0; s < Stages; ++s) {
      ptx::mbarrier_init(full(s), 1);
      ptx::mbarrier_init(empty(s), consumer_arrivals * Cluster);
    }
  }

  // Producer (one thread): waits until the consumers released the stage. Fresh barriers
  // pass at once: the producer waits on the phase before the consumers' first one.
  __device__ __forceinline__ void producer_acquire(const PipelineState<Stages>& st) const {
    mbarrier_wait_idle(empty(st.index), st.phase ^ 1);
  }

  // Producer (one thread): announces the `bytes` of TMA loads the stage will receive; the
  // stage is full once they have landed. Returns the barrier the loads complete on.
  __device__ __forceinline__ uint32_t producer_commit(const PipelineState<Stages>& st,
                                                      uint32_t bytes) const {
    ptx::mbarrier_arrive_expect_tx(full(st.index), bytes);
    return full(st.index);
  }

  __device__ __forceinline__ void consumer_wait(const PipelineState<Stages>& st) const {
    mbarrier_wait(full(st.index), st.phase);
  }

  // Called by each of init's consumer arrivals once its reads of the stage are complete.
  __device__ __forceinline__ void consumer_release(const PipelineState<Stages>& st) const {
    if constexpr (Cluster == 1) {
      ptx::mbarrier_arrive(empty(st.index));
    } else {
#pragma unroll
      for (uint32_t r = 0; r < Cluster; ++r)
        ptx::mbarrier_arrive_cluster(ptx::mapa_shared_cluster(empty(st.index), r));
    }
  }
};

}  // namespace fa3::tile
