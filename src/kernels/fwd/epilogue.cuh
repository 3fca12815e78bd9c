// The forward epilogue (paper Algorithm 1, lines 24-25): O_i = diag(l_i)^-1 O_i to 16 bits in
// shared memory, stored by TMA, and LSE_i. Where O is staged (over Q, or a tile of its own)
// and who stores it (a consumer thread, or the Q warp) follow the config's tile loop.
#pragma once

#include <stdint.h>

#include "kernels/fwd/scheduler.cuh"
#include "kernels/fwd/traits.cuh"
#include "ptx/barrier.cuh"
#include "ptx/math.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "tile/fragment.cuh"

namespace fa3 {

// The TMA store of one consumer warpgroup's O rows (staged at o_rows, first query row
// first_row), one 64-column chunk at a time; the caller commits the bulk group.
template <class Tr>
__device__ __forceinline__ void store_o_rows(const FwdParams& p, uint32_t o_rows, int first_row,
                                             int head, int batch) {
  for (int c = 0; c < Tr::QTile::kChunks; ++c) {
    const uint32_t src = o_rows + c * Tr::QTile::kChunkBytes;
    if constexpr (Tr::kEvictFirstQO)
      ptx::tma_store_4d_hinted(&p.tma_o, src, ptx::l2_policy_evict_first(), c * 64, first_row,
                               head, batch);
    else
      ptx::tma_store_4d(&p.tma_o, src, c * 64, first_row, head, batch);
  }
}

// Lines 24-25 for the CTA's k-th tile: O_i = diag(l)^-1 O_i and L_i. O_i goes to shared
// memory and one thread stores it with TMA (which clips the rows past seqlen_q).
// Non-persistent: O_i goes over this warpgroup's own Q rows (its last wgmma reading them has
// completed). Persistent: into the O tile, once the store of the previous tile has read it;
// nobody waits for this store until the next tile's epilogue (or the end of the kernel).
// Persistent with O over Q: over the Q rows of the tile's Q buffer, which is handed back to
// the producer once the store has read them.
template <class Tr, int OAcc>
__device__ __forceinline__ void fwd_epilogue(const FwdParams& p, const FwdSmem<Tr>& sm,
                                             const FwdWork<Tr>& w, int wg, int k, int first_row,
                                             int thread_in_wg, const float (&inv_sum)[2],
                                             const float (&lse)[2],
                                             float (&o)[OAcc]) {
  const int lane = thread_in_wg % 32;
  const uint32_t o_rows = sm.o_buffer(k) + Tr::warpgroup_rows_offset(wg);
#pragma unroll
  for (int e = 0; e < Tr::kHeadDim / 2; ++e) o[e] *= inv_sum[tile::AccLayout::half(e)];
  if (Tr::kPersistent && !Tr::kOOverQ && k > 0) {
    if (thread_in_wg == 0) ptx::bulk_wait_group_read<0>();
    ptx::named_barrier_sync(kBarrierEpilogueBase + wg, 128);
  }
#pragma unroll
  for (int e = 0; e < Tr::kHeadDim / 2; e += 2) {
    const int row = tile::AccLayout::row(thread_in_wg, e), col = tile::AccLayout::col(thread_in_wg, e);
    const uint32_t packed = Tr::kIsBF16 ? ptx::pack_bf16x2(o[e], o[e + 1])
                                        : ptx::pack_f16x2(o[e], o[e + 1]);
    ptx::st_shared_u32(o_rows + Tr::QTile::offset(row, col), packed);
  }
  ptx::fence_proxy_async_shared();  // generic-proxy writes -> TMA (async proxy) reads
  if constexpr (Tr::kQWarpStoresO) {
    // Done with the buffer (its Q read, its tile slot read, these O rows written): the Q
    // warp stores O once every consumer thread has arrived (fwd_q_loader).
    ptx::mbarrier_arrive(sm.q_empty_bar(k));
  } else {
    ptx::named_barrier_sync(kBarrierEpilogueBase + wg, 128);
  }
  // Three Q buffers: every thread but the storing one is done with this Q buffer (its
  // tile slot, its O rows written); its arrival is the thread's own, as racecheck wants it.
  if constexpr (Tr::kLateQRelease)
    if (thread_in_wg != 0) ptx::mbarrier_arrive(sm.q_empty_bar(k));
  if (!Tr::kQWarpStoresO && thread_in_wg == 0) {
    // Three Q buffers: the previous tile's O store has had this tile's key blocks to
    // read its Q buffer: hand that buffer back (to the Q of tile k + 2), before this store
    // is issued, so the wait is for the old store alone and finds it done.
    if constexpr (Tr::kLateQRelease)
      if (k > 0) {
        ptx::bulk_wait_group_read<0>();
        ptx::mbarrier_arrive(sm.q_empty_bar(k - 1));
      }
    store_o_rows<Tr>(p, o_rows, first_row, w.head, w.batch);
    ptx::bulk_commit_group();
  }
  // Every thread arrives, after the storing thread has seen the store read the buffer: a
  // lane-0 arrival after the barrier orders the other lanes' reads of the tile slot before
  // the next write of it as well, but racecheck reports them (as for release_q).
  if constexpr (Tr::kOOverQ && !Tr::kLateQRelease && !Tr::kQWarpStoresO) {
    if (thread_in_wg == 0) ptx::bulk_wait_group_read<0>();
    ptx::named_barrier_sync(kBarrierEpilogueBase + wg, 128);
    ptx::mbarrier_arrive(sm.q_empty_bar(k));
  }
  if (p.lse != nullptr && lane % 4 == 0) {
    for (int h = 0; h < 2; ++h) {
      const int row = first_row + tile::AccLayout::row(thread_in_wg, 2 * h);
      if (row < p.seqlen_q) {
        const int64_t bh = static_cast<int64_t>(w.batch) * p.heads + w.head;
        p.lse[bh * p.seqlen_q + row] = lse[h];
      }
    }
  }
}

}  // namespace fa3
