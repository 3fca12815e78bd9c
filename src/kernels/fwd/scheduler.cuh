// The forward tile scheduler: which (query block, head, batch) each tile of a CTA is, in
// which order tiles are handed out (one per CTA; persistent round-robin; drawn from a
// counter, causal tiles longest first in L2-sized head groups), and the producer's and the
// consumers' walks over them. The producer publishes each tile with its Q (tile slots and
// q_full); the consumers follow.
#pragma once

#include <stdint.h>

#include "kernels/fast_divisor.h"
#include "kernels/fwd/traits.cuh"
#include "ptx/math.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "tile/pipeline.cuh"

namespace fa3 {

// Which (batch, head, query block) a tile is, and which key blocks it visits. A CTA walks
// the tiles blockIdx.x, blockIdx.x + gridDim.x, ...: one tile each when the grid has one CTA
// per tile, a round-robin share when it is persistent (one CTA per SM); kernels that draw
// their tiles (FwdConfig::draws_tiles) take the next from a counter instead (draw_tile).
template <class Tr>
struct FwdWork {
  int m_block, head, batch;
  int n_blocks;  // key blocks [0, n_blocks) hold keys some row of this block may see

  FwdWork() = default;
  __device__ __forceinline__ FwdWork(const FwdParams& p, int tile) {
    int m, bh;
    if (Tr::kCausal && Tr::kPersistent) {
      // Groups of l2_group (batch, head) pairs whose K and V fit in L2 together, one after
      // the other; in a group, longest first (the dynamic scheduler then evens out the ends).
      // Only the last group may be smaller.
      const QuotRem g = fast_divmod(tile, p.group_tiles_div);
      const bool short_group = p.heads * p.batch - g.quot * p.l2_group < p.l2_group;
      const QuotRem r = fast_divmod(g.rem, short_group ? p.last_group_div : p.l2_group_div);
      m = r.quot;
      bh = g.quot * p.l2_group + r.rem;
    } else {
      // The query blocks of one head are neighbours: CTAs running together share its K/V in L2.
      const QuotRem t = fast_divmod(tile, p.m_blocks_div);
      m = t.rem;
      bh = t.quot;
    }
    // Causal: blocks near the end of the sequence have the most keys; they go first.
    m_block = Tr::kCausal ? p.num_m_blocks - 1 - m : m;
    const QuotRem hb = fast_divmod(bh, p.heads_div);
    head = hb.rem;
    batch = hb.quot;
    n_blocks = key_blocks(p, m_block);
  }
  // A tile decoded already (the dynamic scheduler's tile_record).
  __device__ __forceinline__ FwdWork(const FwdParams& p, int m_block_, int head_, int batch_)
      : m_block(m_block_), head(head_), batch(batch_), n_blocks(key_blocks(p, m_block_)) {}
  __device__ __forceinline__ static int key_blocks(const FwdParams& p, int m_block) {
    int key_end = p.seqlen_k;
    if (Tr::kCausal) {
      // Bottom-right aligned: query row i sees keys j <= i + seqlen_k - seqlen_q.
      const int last_row = min((m_block + 1) * Tr::kBlockM, p.seqlen_q) - 1;
      key_end = min(p.seqlen_k, last_row + 1 + p.seqlen_k - p.seqlen_q);
    }
    return key_end > 0 ? (key_end + Tr::kBlockN - 1) / Tr::kBlockN : 0;
  }
  // The first query row of consumer warpgroup wg.
  __device__ __forceinline__ int first_row(int wg) const {
    return m_block * Tr::kBlockM + wg * Tr::kRowsPerWarpgroup;
  }
  // The K/V head this tile's head reads (GQA/MQA).
  __device__ __forceinline__ int kv_head(const FwdParams& p) const {
    return static_cast<int>(fast_div(static_cast<uint32_t>(head), p.kv_group_div));
  }
};

// The key block a tile visits at iteration `it` of its n_blocks (producer and consumers agree).
template <class Tr>
__device__ __forceinline__ int visited_block(int it, int n_blocks) {
  return Tr::kAscending ? it : n_blocks - 1 - it;
}

// Calls body(tile, k) for the k-th tile of this CTA. A non-persistent kernel has exactly one
// tile, blockIdx.x: no loop, and no loop state to keep in registers.
template <class Tr, class Body>
__device__ __forceinline__ void for_each_tile(const FwdParams& p, Body&& body) {
  if constexpr (Tr::kPersistent) {
    int k = 0;
    for (int tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x, ++k) body(tile, k);
  } else {
    body(static_cast<int>(blockIdx.x), 0);
  }
}

// The dynamic scheduler (Tr::kDynamic): every CTA starts with tile blockIdx.x; the producer
// draws each next one from the launch's counter as it starts loading it. num_tiles draws
// happen in all (one past the end per CTA), so the draw of ticket num_tiles - 1 is the last
// one of the launch: it puts the counter back to 0 for the next launch in the stream.
__device__ __forceinline__ int draw_tile(const FwdParams& p) {
  const uint32_t ticket = atomicAdd(p.tile_counter, 1u);
  if (ticket == static_cast<uint32_t>(p.num_tiles) - 1u) atomicExch(p.tile_counter, 0u);
  return static_cast<int>(gridDim.x + ticket);
}

// A persistent CTA's next Q, pulled into L2 while this tile runs: Q is read by one CTA only,
// so its load comes from DRAM, and the next tile would wait for it. Static schedule only:
// issued after the dynamic scheduler's draw, it made the causal kernels 1-2% slower.
template <class Tr>
__device__ __forceinline__ void prefetch_q(const FwdParams& p, int tile) {
  if (tile >= p.num_tiles) return;
  const FwdWork<Tr> w(p, tile);
  for (int wg = 0; wg < Tr::kConsumers; ++wg)
    for (int c = 0; c < Tr::QTile::kChunks; ++c)
      ptx::tma_prefetch_l2_4d(&p.tma_q, c * 64, w.first_row(wg), w.head, w.batch);
}

// The dynamic scheduler's tile slot of a Q buffer: the tile, and (for a tile before the end)
// its query block, head and batch, decoded once by the thread that publishes it, so the
// consumers take them off their own path from one tile to the next (FwdWork's divisions
// were 2% of the warp samples of d64 causal at 1k).
__device__ __forceinline__ uint4 tile_record(int tile, int m_block, int head, int batch) {
  return make_uint4(static_cast<uint32_t>(tile), static_cast<uint32_t>(m_block),
                    static_cast<uint32_t>(head), static_cast<uint32_t>(batch));
}

// Before the k-th tile's Q: persistent kernels wait until every consumer warp is done with
// the Q buffer's previous tile; the dynamic scheduler then publishes the tile (the consumers
// read it once this Q has landed, and have read the buffer's previous one by now).
// `w` is the tile decoded, or null for a tile past the end.
template <class Tr>
__device__ __forceinline__ void producer_claim_q(const FwdSmem<Tr>& sm, int tile,
                                                 const FwdWork<Tr>* w, int k) {
  if (k >= Tr::kQBuffers)
    tile::mbarrier_wait_idle(sm.q_empty_bar(k), sm.q_parity(k - Tr::kQBuffers));
  if constexpr (Tr::kDynamic)
    ptx::st_shared_v4_u32(sm.tile_slot_of(k), w ? tile_record(tile, w->m_block, w->head, w->batch)
                                                : tile_record(tile, 0, 0, 0));
}

// The producer's walk over its tiles: body(tile, k) loads the k-th one (and calls
// producer_claim_q before its Q). Dynamic: a tile past the end, published with an arrival
// on q_full that carries no loads, tells the consumers to stop.
template <class Tr, class Body>
__device__ __forceinline__ void producer_tiles(const FwdParams& p, const FwdSmem<Tr>& sm,
                                               Body&& body) {
  if constexpr (Tr::kDynamic && Tr::kQWarp) {
    // The Q warp draws; the K/V thread follows its tiles as they are published.
    for (int k = 0;; ++k) {
      tile::mbarrier_wait_idle(sm.tile_ready_bar(k), sm.q_parity(k));
      const int tile = static_cast<int>(ptx::ld_shared_u32(sm.tile_slot_of(k)));
      if (tile >= p.num_tiles) return;
      body(tile, k);
    }
  } else if constexpr (Tr::kDynamic) {
    int tile = blockIdx.x;
    for (int k = 0;; ++k) {
      if (tile >= p.num_tiles) {
        producer_claim_q<Tr>(sm, tile, nullptr, k);
        ptx::mbarrier_arrive(sm.q_full_bar(k));
        return;
      }
      body(tile, k);
      tile = draw_tile(p);
    }
  } else {
    for_each_tile<Tr>(p, body);
  }
}

// The tile a consumer's k-th tile is, and whether there is one (dynamic: once its Q buffer
// has been published, its Q landed; static: a tile past the end has no Q to wait for).
template <class Tr>
__device__ __forceinline__ int consumer_tile_at(const FwdParams& p, const FwdSmem<Tr>& sm, int k) {
  if constexpr (Tr::kDynamic) {
    tile::mbarrier_wait(sm.q_full_bar(k), sm.q_parity(k));
    // The same value in every lane, but a shared-memory load is per thread to the compiler:
    // broadcast it, so that what follows from the tile (its key blocks, the loop counts,
    // the stage index they advance) stays in uniform registers (see fwd_kernel).
    return warp_uniform(static_cast<int>(ptx::ld_shared_u32(sm.tile_slot_of(k))));
  } else {
    const int64_t tile = blockIdx.x + static_cast<int64_t>(k) * gridDim.x;
    return tile < p.num_tiles ? static_cast<int>(tile) : p.num_tiles;
  }
}

// consumer_tile_at, and the tile decoded into *w when there is one (dynamic: from its slot).
template <class Tr>
__device__ __forceinline__ int consumer_work_at(const FwdParams& p, const FwdSmem<Tr>& sm, int k,
                                                FwdWork<Tr>* w) {
  if constexpr (Tr::kDynamic) {
    tile::mbarrier_wait(sm.q_full_bar(k), sm.q_parity(k));
    const uint4 r = ptx::ld_shared_v4_u32(sm.tile_slot_of(k));
    const int tile = warp_uniform(static_cast<int>(r.x));
    if (tile < p.num_tiles)
      *w = FwdWork<Tr>(p, warp_uniform(static_cast<int>(r.y)), warp_uniform(static_cast<int>(r.z)),
                       warp_uniform(static_cast<int>(r.w)));
    return tile;
  } else {
    const int tile = consumer_tile_at<Tr>(p, sm, k);
    if (tile < p.num_tiles) *w = FwdWork<Tr>(p, tile);
    return tile;
  }
}

// The consumers' walk: body(tile, k) computes the k-th tile of this CTA. Dynamic: the tile
// is known once its Q has landed (body must not wait for Q again); otherwise body waits.
template <class Tr, class Body>
__device__ __forceinline__ void consumer_tiles(const FwdParams& p, const FwdSmem<Tr>& sm,
                                               Body&& body) {
  if constexpr (Tr::kDynamic) {
    for (int k = 0;; ++k) {
      const int tile = consumer_tile_at<Tr>(p, sm, k);
      if (tile >= p.num_tiles) return;
      body(tile, k);
    }
  } else {
    for_each_tile<Tr>(p, body);
  }
}

}  // namespace fa3
