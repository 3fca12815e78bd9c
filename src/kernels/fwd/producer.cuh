// The forward producer (paper Algorithm 1, lines 2-10): TMA loads of Q_i and of the K_j, V_j
// blocks into the s-stage pipeline, by one thread of the producer warpgroup, for every tile
// of the CTA; the Q warp's loop where a warp of its own loads Q (and draws tiles, and may
// store O); and the inline loader of kernels without warp specialization.
#pragma once

#include <stdint.h>

#include "kernels/fwd/epilogue.cuh"
#include "kernels/fwd/scheduler.cuh"
#include "kernels/fwd/traits.cuh"
#include "ptx/cluster.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "tile/pipeline.cuh"

namespace fa3 {

// Lines 4-5: Q_i, one 64 x 64 box per consumer warpgroup and column chunk. (Q is loaded even
// for a tile without keys: the consumers wait for it either way.)
template <class Tr>
__device__ __forceinline__ void load_q(const FwdParams& p, const FwdSmem<Tr>& sm,
                                       const FwdWork<Tr>& w, int k) {
  const uint32_t full = sm.q_full_bar(k), q = sm.q_buffer(k);
  ptx::mbarrier_arrive_expect_tx(full, Tr::QTile::kBytes);
  for (int wg = 0; wg < Tr::kConsumers; ++wg)
    for (int c = 0; c < Tr::QTile::kChunks; ++c) {
      const uint32_t dst = q + c * Tr::QTile::kChunkBytes + Tr::warpgroup_rows_offset(wg);
      if constexpr (Tr::kEvictFirstQO)
        ptx::tma_load_4d_hinted(dst, &p.tma_q, full, ptx::l2_policy_evict_first(), c * 64,
                                w.first_row(wg), w.head, w.batch);
      else
        ptx::tma_load_4d(dst, &p.tma_q, full, c * 64, w.first_row(wg), w.head, w.batch);
    }
}

// Lines 7-9: key block n_block of K (or V, by `map` and `pipe`) into stage st once the
// consumers released it. Rows past seqlen_k are zero-filled by TMA (and masked by the
// consumers). In a cluster, this CTA loads its share of the rows (the map's box is
// block_n / cluster rows) into the same place in every CTA; its barrier still expects the
// whole stage, the other shares coming from the other CTAs' producers.
template <class Tr>
__device__ __forceinline__ void load_kv_block(const TensorMapBytes* map,
                                              const typename Tr::KVPipe& pipe,
                                              uint32_t stage_base,
                                              const tile::PipelineState<Tr::kStages>& st,
                                              int n_block, int kv_head, int batch) {
  pipe.producer_acquire(st);
  const uint32_t full = pipe.producer_commit(st, Tr::KVTile::kBytes);
  if constexpr (Tr::kCluster == 1) {
    for (int c = 0; c < Tr::KVTile::kChunks; ++c) {
      const uint32_t dst = stage_base + c * Tr::KVTile::kChunkBytes;
      if constexpr (Tr::kEvictLastKV)
        ptx::tma_load_4d_hinted(dst, map, full, ptx::l2_policy_evict_last(), c * 64,
                                n_block * Tr::kBlockN, kv_head, batch);
      else
        ptx::tma_load_4d(dst, map, full, c * 64, n_block * Tr::kBlockN, kv_head, batch);
    }
  } else {
    constexpr int kRows = Tr::kBlockN / Tr::kCluster;
    constexpr uint16_t kEveryCta = (1u << Tr::kCluster) - 1;
    const int rank = static_cast<int>(ptx::cluster_ctarank());
    for (int c = 0; c < Tr::KVTile::kChunks; ++c)
      ptx::tma_load_4d_multicast(stage_base + c * Tr::KVTile::kChunkBytes + rank * kRows * 128,
                                 map, full, kEveryCta, c * 64, n_block * Tr::kBlockN + rank * kRows,
                                 kv_head, batch);
  }
}

// Paper Algorithm 1, lines 2-10 (one elected thread of the producer warpgroup), for every
// tile of this CTA. The K/V pipeline runs on across tiles: the next tile's K and V load
// while the consumers finish the current one, and the next Q as soon as every consumer
// warp's last QK^T GEMM of this tile has read Q, where O has a tile of its own (else once
// O's store has read it: kOOverQ).
template <class Tr>
__device__ __forceinline__ void fwd_producer(const FwdParams& p, const FwdSmem<Tr>& sm) {
  ptx::prefetch_tensormap(&p.tma_q);
  ptx::prefetch_tensormap(&p.tma_k);
  ptx::prefetch_tensormap(&p.tma_v);
  ptx::prefetch_tensormap(&p.tma_o);
  tile::PipelineState<Tr::kStages> st;
  producer_tiles<Tr>(p, sm, [&](int tile, int k) {
    const FwdWork<Tr> w(p, tile);
    const int kv_head = w.kv_head(p);
    // Lines 6-10: K_j and V_j into stage j % s.
    constexpr bool kDrawGo = Tr::kDynamic && Tr::kQWarp;
    const int draw_go_at = max(0, w.n_blocks - 1 - Tr::kDrawLead);
    auto load_block = [&](int it) {
      const int n_block = visited_block<Tr>(it, w.n_blocks);
      load_kv_block<Tr>(&p.tma_k, sm.k_pipe, sm.k_stage(st.index), st, n_block, kv_head, w.batch);
      load_kv_block<Tr>(&p.tma_v, sm.v_pipe, sm.v_stage(st.index), st, n_block, kv_head, w.batch);
      st.advance();
      if (kDrawGo && it == draw_go_at) ptx::mbarrier_arrive(sm.draw_go);
    };
    if (kDrawGo && w.n_blocks == 0) ptx::mbarrier_arrive(sm.draw_go);
    // The first K/V block goes before Q: its stage frees up before the previous tile's
    // last QK^T releases Q, so a persistent CTA's next tile does not start cold. With two Q
    // buffers (cross-tile) Q's is free long before: Q first, from DRAM. (With a Q warp, Q
    // is the Q warp's.)
    if (!Tr::kCrossTile && w.n_blocks > 0) load_block(0);
    if constexpr (!Tr::kQWarp) {
      producer_claim_q<Tr>(sm, tile, &w, k);
      load_q<Tr>(p, sm, w, k);
    }
    if (Tr::kCrossTile && w.n_blocks > 0) load_block(0);
    if constexpr (Tr::kPersistent && !Tr::kDynamic && !Tr::kQWarp)
      prefetch_q<Tr>(p, tile + static_cast<int>(gridDim.x));
    for (int it = 1; it < w.n_blocks; ++it) load_block(it);
  });
}

// Tiles::CrossTileQWarpStoresO: the TMA store of the O of the CTA's k-th tile (tile w), which
// its consumers wrote over Q buffer k before they arrived on q_empty.
template <class Tr>
__device__ __forceinline__ void q_warp_store_o(const FwdParams& p, const FwdSmem<Tr>& sm,
                                               const FwdWork<Tr>& w, int k) {
  for (int wg = 0; wg < Tr::kConsumers; ++wg)
    store_o_rows<Tr>(p, sm.o_buffer(k) + Tr::warpgroup_rows_offset(wg), w.first_row(wg), w.head,
                     w.batch);
  ptx::bulk_commit_group();
}

// How long one try of the Q warp's two-barrier wait below may suspend it: short, as the
// other barrier's phase may complete meanwhile and goes unnoticed until the try returns.
constexpr uint32_t kTwoWaitSuspendNs = 100;

// fwd_q_loader when the Q warp stores O (Tiles::CrossTileQWarpStoresO). After tile k's Q, the thread waits for tile
// k-1's consumers (q_empty: its O is in the buffer) and stores that O; the store has read the
// buffer long before the buffer's next Q (tile k+1), which waits for the read. Dynamic: the
// draw of tile k+1 (draw_go, kDrawLead blocks before tile k's end) comes before tile k-1's
// O when tile k is short, so the thread waits for whichever comes first.
template <class Tr>
__device__ __forceinline__ void fwd_q_loader_storing_o(const FwdParams& p, const FwdSmem<Tr>& sm) {
  static_assert(Tr::kOOverQ && Tr::kQBuffers == 2, "_os: O over two Q buffers");
  ptx::prefetch_tensormap(&p.tma_o);
  FwdWork<Tr> prev{};  // tile k-1, whose O is stored during tile k
  auto wait_and_store_prev = [&](int k) {
    tile::mbarrier_wait_idle(sm.q_empty_bar(k - 1), sm.q_parity(k - 1));
    q_warp_store_o<Tr>(p, sm, prev, k - 1);
  };
  // The store of tile k-2's O (from Q buffer k) has read the buffer: it may take tile k.
  auto buffer_read = [&](int k) {
    if (k >= Tr::kQBuffers) ptx::bulk_wait_group_read<0>();
  };
  if constexpr (Tr::kDynamic) {
    int tile = blockIdx.x;
    for (int k = 0;; ++k) {
      buffer_read(k);
      if (tile >= p.num_tiles) {
        producer_claim_q<Tr>(sm, tile, nullptr, k);
        ptx::mbarrier_arrive(sm.tile_ready_bar(k));
        ptx::mbarrier_arrive(sm.q_full_bar(k));
        if (k > 0) wait_and_store_prev(k);
        ptx::bulk_wait_group_read<0>();  // shared memory outlives the store's reads
        return;
      }
      const FwdWork<Tr> w(p, tile);
      // (Its q_empty wait, for tile k-2's phase, returns at once: the previous iteration
      // waited for that phase before it stored tile k-2's O.)
      producer_claim_q<Tr>(sm, tile, &w, k);
      ptx::mbarrier_arrive(sm.tile_ready_bar(k));
      load_q<Tr>(p, sm, w, k);
      // Whichever comes first, in short tries; then the other in the long tries of an idle
      // wait, as this warp's other waits (measured: the same speed as short tries throughout).
      bool stored = k == 0, drawn = false;
      while (!stored && !drawn) {
        if (ptx::mbarrier_try_wait_parity_for(sm.q_empty_bar(k - 1), sm.q_parity(k - 1),
                                              kTwoWaitSuspendNs)) {
          q_warp_store_o<Tr>(p, sm, prev, k - 1);
          stored = true;
        } else if (ptx::mbarrier_try_wait_parity_for(sm.draw_go, static_cast<uint32_t>(k & 1),
                                                     kTwoWaitSuspendNs)) {
          tile = draw_tile(p);
          drawn = true;
        }
      }
      if (!stored) wait_and_store_prev(k);
      if (!drawn) {
        tile::mbarrier_wait_idle(sm.draw_go, static_cast<uint32_t>(k & 1));
        tile = draw_tile(p);
      }
      prev = w;
    }
  } else {
    int tiles = 0;
    for_each_tile<Tr>(p, [&](int tile, int k) {
      buffer_read(k);
      const FwdWork<Tr> w(p, tile);
      producer_claim_q<Tr>(sm, tile, &w, k);
      load_q<Tr>(p, sm, w, k);
      if (k > 0) wait_and_store_prev(k);
      prev = w;
      tiles = k + 1;
    });
    if (tiles > 0) wait_and_store_prev(tiles);
    ptx::bulk_wait_group_read<0>();  // shared memory outlives the store's reads
  }
}

// The Q warp (Tiles::CrossTileQWarp*): the producer warpgroup's second warp loads Q (one
// thread), apart from the K/V thread, each tile's as soon as its buffer is free (the epilogue
// of the tile two before, three with CrossTileQWarp3, has read it), so the next Q is there
// before this tile's last PV even when the tile is short; one thread issuing both would block
// its K/V loads on that buffer (measured on an H100: d64 m128 non-causal +4-14%, d128 causal
// +1-2.6% against the K/V thread loading Q). Dynamic: this thread also draws the tiles
// (kDrawLead blocks before the end of the current one) and publishes each (tile_ready) before
// its Q; a tile past the end stops the K/V thread and the consumers.
template <class Tr>
__device__ __forceinline__ void fwd_q_loader(const FwdParams& p, const FwdSmem<Tr>& sm) {
  ptx::prefetch_tensormap(&p.tma_q);
  if constexpr (Tr::kQWarpStoresO) {
    fwd_q_loader_storing_o<Tr>(p, sm);
  } else if constexpr (Tr::kDynamic) {
    int tile = blockIdx.x;
    for (int k = 0;; ++k) {
      if (tile >= p.num_tiles) {
        producer_claim_q<Tr>(sm, tile, nullptr, k);
        ptx::mbarrier_arrive(sm.tile_ready_bar(k));
        ptx::mbarrier_arrive(sm.q_full_bar(k));
        return;
      }
      const FwdWork<Tr> w(p, tile);
      producer_claim_q<Tr>(sm, tile, &w, k);
      ptx::mbarrier_arrive(sm.tile_ready_bar(k));
      load_q<Tr>(p, sm, w, k);
      tile::mbarrier_wait_idle(sm.draw_go, static_cast<uint32_t>(k & 1));
      tile = draw_tile(p);
    }
  } else {
    for_each_tile<Tr>(p, [&](int tile, int k) {
      const FwdWork<Tr> w(p, tile);
      producer_claim_q<Tr>(sm, tile, &w, k);
      load_q<Tr>(p, sm, w, k);
    });
  }
}

// Without warp specialization: the loads of one tile, issued by the CTA's first consumer
// thread. Q and the first `stages` K and V blocks go out before the mainloop; after that
// each K (V) block is loaded right after this thread released the stage it goes into,
// waiting there until every consumer warp has released it. The waits tie the consumer
// warpgroups together: the cost the paper's ablation measures.
template <class Tr>
struct InlineLoader {
  struct Cursor {
    int next = 0;                         // the next block to load, in visiting order
    tile::PipelineState<Tr::kStages> st;  // and the stage it goes into
  };
  int n_blocks = 0, kv_head = 0, batch = 0;
  Cursor k, v;

  __device__ __forceinline__ void load_next(const TensorMapBytes* map,
                                            const typename Tr::KVPipe& pipe,
                                            uint32_t stage_base, Cursor& c) {
    if (c.next >= n_blocks) return;
    load_kv_block<Tr>(map, pipe, stage_base, c.st, n_blocks - 1 - c.next, kv_head, batch);
    c.st.advance();
    ++c.next;
  }
  __device__ __forceinline__ void load_k(const FwdParams& p, const FwdSmem<Tr>& sm) {
    load_next(&p.tma_k, sm.k_pipe, sm.k_stage(k.st.index), k);
  }
  __device__ __forceinline__ void load_v(const FwdParams& p, const FwdSmem<Tr>& sm) {
    load_next(&p.tma_v, sm.v_pipe, sm.v_stage(v.st.index), v);
  }
  __device__ __forceinline__ void start(const FwdParams& p, const FwdSmem<Tr>& sm,
                                        const FwdWork<Tr>& w) {
    ptx::prefetch_tensormap(&p.tma_k);
    ptx::prefetch_tensormap(&p.tma_v);
    n_blocks = w.n_blocks;
    kv_head = w.kv_head(p);
    batch = w.batch;
    load_q<Tr>(p, sm, w, 0);
    for (int s = 0; s < Tr::kStages; ++s) {
      load_k(p, sm);
      load_v(p, sm);
    }
  }
};

}  // namespace fa3
