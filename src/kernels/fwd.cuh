// FlashAttention-3 forward, warp-specialized (paper Algorithm 1), optionally with
// intra-warpgroup GEMM-softmax pipelining (Algorithm 2, or the 3-stage Algorithm 4) and
// pingpong scheduling (Section 3.1).
//
// One CTA computes O_i for a block of block_m query rows of one (batch, head):
//   warpgroup 0       producer: one thread issues TMA loads of Q_i once and of K_j, V_j into
//                     an s-stage circular buffer (q_warp: a thread of its second warp
//                     loads Q); the warpgroup gives its registers away.
//   warpgroups 1..W   consumers: each owns 64 query rows; S = Q K^T (SS-wgmma), online
//                     softmax in fp32, P in 16-bit registers, O += P V (RS-wgmma).
// Without warp specialization (the paper's ablation) there is no producer warpgroup: the
// first consumer thread issues the loads between its own GEMMs (InlineLoader).
// Key blocks are visited from the last to the first, so the blocks that need masking (the
// causal diagonal, the seqlen_k tail) come first, while the row max is still being found;
// Config::ascending visits them first to last (the masked ones last), so that causal CTAs
// started together on one head ask for the same K/V block at about the same moment.
#pragma once

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "kernels/fwd_config.h"
#include "kernels/fwd_params.h"
#include "ptx/barrier.cuh"
#include "ptx/cluster.cuh"
#include "ptx/math.cuh"
#include "ptx/regs.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "tile/fragment.cuh"
#include "tile/gemm.cuh"
#include "tile/pipeline.cuh"
#include "tile/smem_tile.cuh"
#include "tile/softmax.cuh"

namespace fa3 {

// Named barrier ids of the forward kernel (0 is __syncthreads).
enum FwdBarrier : uint32_t {
  kBarrierEpilogueBase = 1,  // + consumer warpgroup index: its O tile is in shared memory
  kBarrierTurnBase = 4,      // + consumer warpgroup index: its turn to issue GEMMs (pingpong)
};

// Compile-time view of one FwdConfig (C::value), with the types its code needs.
template <class C>
struct FwdTraits {
  static constexpr FwdConfig kCfg = C::value;
  static_assert(fwd_config_is_valid(kCfg), "invalid forward config");
  static constexpr bool kIsBF16 = kCfg.dtype == DType::BF16;
  static constexpr ptx::MmaType kMma = kIsBF16 ? ptx::MmaType::BF16 : ptx::MmaType::F16;
  static constexpr int kHeadDim = kCfg.head_dim;
  static constexpr int kBlockM = kCfg.block_m;
  static constexpr int kBlockN = kCfg.block_n;
  static constexpr int kStages = kCfg.stages;
  static constexpr int kConsumers = kCfg.consumer_warpgroups;
  static constexpr bool kCausal = kCfg.causal;
  static constexpr bool kOverlap = kCfg.overlap;
  static constexpr bool kPingpong = kCfg.pingpong;
  static constexpr bool kDoubleP = kCfg.double_p;
  static constexpr bool kPersistent = kCfg.persistent;
  static constexpr bool kThreeStage = kCfg.three_stage;
  static constexpr bool kB2Order = kCfg.b2_order;
  static constexpr bool kConditionalRescale = kCfg.conditional_rescale;
  static constexpr bool kIntMax = kCfg.int_max;
  static constexpr bool kWarpSpecialized = kCfg.warp_specialized;
  static constexpr int kCluster = kCfg.cluster_m;
  static constexpr bool kAscending = kCfg.ascending;
  static constexpr bool kCrossTile = kCfg.cross_tile;
  static constexpr bool kQWarp = kCfg.q_warp;
  static constexpr bool kExpAfterPvWait = kCfg.exp_after_pv_wait;
  static constexpr bool kHalfBlocks = kCfg.half_blocks;
  static constexpr bool kRowSumMma = kCfg.row_sum_mma;
  static constexpr bool kQInRegisters = kCfg.q_in_registers;
  static constexpr bool kEvictFirstQO = kCfg.evict_first_q_o;
  static constexpr bool kEvictLastKV = kCfg.evict_last_kv;
  // A consumer thread's O accumulators: its part of the 64 x head_dim O, then (row_sum_mma)
  // of the PV GEMM's 8 columns of row sums.
  static constexpr int kOAcc = kHeadDim / 2 + (kRowSumMma ? 4 : 0);
  // Causal persistent kernels hand tiles out through a global counter (longest first), and
  // so do non-causal ones with Config::dynamic_schedule (in the static walk's order).
  static constexpr bool kDynamic = kCfg.draws_tiles();
  // Config::q_warp with the dynamic scheduler: the Q warp draws a CTA's next tile once the
  // K/V thread has issued all but this many of the current tile's blocks. Drawing at the
  // start of the tile measured the same on the paper's grid (bench/NOTES.md v10), but
  // binds a tile to a CTA before anyone knows which CTA frees up first: with a few tiles
  // per CTA the longest-first order then no longer evens out the ends. Drawing after the
  // last block (0) left the next Q late again (d128 causal -0.5 to -2.6%).
  static constexpr int kDrawLead = 2;
  static constexpr int kProducerRegs = kCfg.producer_regs();
  static constexpr int kConsumerRegs = kCfg.consumer_regs();
  static constexpr FwdSmemLayout kSmem = FwdSmemLayout::of(kCfg);
  static constexpr int kQBuffers = static_cast<int>(kSmem.q_buffers);
  static constexpr uint32_t kTileSlotBytes = fwd_tile_slot_bytes(kSmem.q_buffers);
  // Persistent without room for an O tile of its own (d256): O is staged over Q, so Q is
  // released for the next tile only once O's store has read it.
  static constexpr bool kOInQBuffer = kSmem.o_over_q();
  // Config::three_q_buffers: a Q buffer holding a stored O is handed back by the thread that
  // issued the store in the next tile's epilogue (fwd_epilogue), not right after the store;
  // the other threads hand it back in its own epilogue.
  static constexpr bool kLateQRelease = kCfg.three_q_buffers;
  // Config::q_warp_stores_o: the Q warp stores O; the consumers only write it to shared memory.
  static constexpr bool kQWarpStoresO = kCfg.q_warp_stores_o;
  static constexpr bool kOOverQ = kPersistent && kOInQBuffer;

  using QTile = tile::SwizzledTile<kBlockM, kHeadDim>;   // Q_i, and O_i
  using KVTile = tile::SwizzledTile<kBlockN, kHeadDim>;  // one stage of K or V
  using KVPipe = tile::TmaPipeline<kStages, kCluster>;
  static_assert(QTile::kBytes == kSmem.q_bytes && KVTile::kBytes == kSmem.kv_stage_bytes, "");
  static constexpr uint32_t kRowsPerWarpgroup = 64;
  // Where consumer warpgroup wg's rows start in each 64-column chunk of the Q (and O) tile.
  __device__ __forceinline__ static uint32_t warpgroup_rows_offset(int wg) {
    return wg * kRowsPerWarpgroup * 128;
  }
};

// Shared-memory addresses of one CTA.
template <class Tr>
struct FwdSmem {
  uint32_t q, k, v, o;  // tile bases (1024-byte aligned); o == q unless persistent
  uint32_t q_full;      // mbarrier per Q buffer: Q_i landed
  uint32_t q_empty;     // mbarrier per Q buffer (persistent): the consumers are done with Q_i
  uint32_t tile_slot;   // u32 per Q buffer (dynamic scheduler): the tile its Q_i belongs to,
                        // set with q_full (q_warp: with tile_ready)
  uint32_t tile_ready;  // mbarrier per Q buffer (q_warp, dynamic): the Q warp published the
                        // buffer's tile, for the K/V thread
  uint32_t draw_go;     // mbarrier (q_warp, dynamic): the K/V thread is kDrawLead blocks
                        // from the end of the current tile; the Q warp may draw the next
  typename Tr::KVPipe k_pipe, v_pipe;

  __device__ __forceinline__ explicit FwdSmem(uint32_t base) {
    constexpr uint32_t kQ = Tr::kQBuffers;
    q = base + Tr::kSmem.q_offset;
    k = base + Tr::kSmem.k_offset;
    v = base + Tr::kSmem.v_offset;
    o = base + Tr::kSmem.o_offset;
    const uint32_t bars = base + Tr::kSmem.barrier_offset;
    q_full = bars;
    q_empty = bars + 8 * kQ;
    k_pipe = {bars + 16 * kQ, bars + 16 * kQ + 8 * Tr::kStages};
    v_pipe = {bars + 16 * kQ + 16 * Tr::kStages, bars + 16 * kQ + 24 * Tr::kStages};
    tile_slot = bars + 16 * kQ + 32 * Tr::kStages;
    tile_ready = tile_slot + Tr::kTileSlotBytes;
    draw_go = tile_ready + 8 * kQ;
  }
  __device__ __forceinline__ uint32_t k_stage(uint32_t s) const { return k + s * Tr::KVTile::kBytes; }
  __device__ __forceinline__ uint32_t v_stage(uint32_t s) const { return v + s * Tr::kSmem.v_stage_bytes; }
  // The CTA's k-th tile uses Q buffer k % kQBuffers, for the (k / kQBuffers)-th time: the
  // parity its barriers are waited with. O is staged over that buffer or in its own tile.
  __device__ __forceinline__ static int q_index(int k) { return k % Tr::kQBuffers; }
  __device__ __forceinline__ static uint32_t q_parity(int k) { return (k / Tr::kQBuffers) & 1; }
  __device__ __forceinline__ uint32_t q_buffer(int k) const { return q + q_index(k) * Tr::QTile::kBytes; }
  __device__ __forceinline__ uint32_t o_buffer(int k) const { return Tr::kOInQBuffer ? q_buffer(k) : o; }
  __device__ __forceinline__ uint32_t q_full_bar(int k) const { return q_full + 8 * q_index(k); }
  __device__ __forceinline__ uint32_t q_empty_bar(int k) const { return q_empty + 8 * q_index(k); }
  __device__ __forceinline__ uint32_t tile_slot_of(int k) const { return tile_slot + 16 * q_index(k); }
  __device__ __forceinline__ uint32_t tile_ready_bar(int k) const { return tile_ready + 8 * q_index(k); }
};

// x from lane 0 of the warp, in a register the compiler knows to hold one value per warp
// (it can then live in the uniform datapath, with what is computed from it).
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xffffffffu, x, 0); }
// A K/V stage index and phase. ptxas does not always see them as warp-uniform: carried from
// one tile to the next of a persistent kernel, or around the three-stage and the
// non-warp-specialized loops, it kept them, and the address of every K and V descriptor
// computed from them, in per-thread registers (a vector add, mask and shift, then R2UR, per
// wgmma; bench/NOTES.md v11, v12). Broadcast where that happened: once per tile, or per step.
template <int Stages>
__device__ __forceinline__ tile::PipelineState<Stages> warp_uniform(tile::PipelineState<Stages> st) {
  st.index = static_cast<uint32_t>(warp_uniform(static_cast<int>(st.index)));
  st.phase = static_cast<uint32_t>(warp_uniform(static_cast<int>(st.phase)));
  return st;
}

// Which (batch, head, query block) a tile is, and which key blocks it visits. A CTA walks
// the tiles blockIdx.x, blockIdx.x + gridDim.x, ...: one tile each when the grid has one CTA
// per tile, a round-robin share when it is persistent (one CTA per SM).
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
// issued after the dynamic scheduler's draw, it made the causal kernels 1-2% slower
// (bench/NOTES.md v7).
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
// were 2% of the warp samples of d64 causal at 1k; bench/NOTES.md v15).
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

// Lines 7 and 9: key block n_block of K (or V, by `map` and `pipe`) into stage st once the
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
// warp's last QK^T GEMM of this tile has read Q (O has its own tile when persistent).
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
    // buffers (cross_tile) Q's is free long before: Q first, from DRAM. (q_warp: Q is the
    // Q warp's.)
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

// Config::q_warp_stores_o: the TMA store of the O of the CTA's k-th tile (tile w), which
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

// fwd_q_loader with Config::q_warp_stores_o. After tile k's Q, the thread waits for tile
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

// Config::q_warp: the producer warpgroup's second warp loads Q (one thread), apart from the
// K/V thread, each tile's as soon as its buffer is free (the epilogue of the tile two
// before has read it), so the next Q is there before this tile's last PV even when the tile
// is short; one thread issuing both would block its K/V loads on that buffer (bench/NOTES.md
// v9). Dynamic: this thread also draws the tiles (kDrawLead blocks before the end of the
// current one) and publishes each (tile_ready) before its Q; a tile past the end stops the
// K/V thread and the consumers.
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

// Sets S to -inf where the key is past seqlen_k or, for causal, after the query's diagonal.
// (N accumulators per thread: block_n / 2, or block_n / 4 for a half-width block.)
// Per row, one bound: element e is masked when its offset from the thread's first key
// (a constant) reaches the row's number of visible keys from there; one compare and one
// select per element (the per-element key and row, two compares and an or were ~3 per
// element, in the step that starts every causal tile).
template <class Tr, int N>
__device__ __forceinline__ void apply_mask(float (&s)[N], const FwdParams& p, int thread_in_wg,
                                           int first_row, int first_key) {
  const int first_thread_key = first_key + tile::AccLayout::col(thread_in_wg, 0);
  int visible[2];  // keys [first_thread_key, first_thread_key + visible[h]) are unmasked
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int key_end = p.seqlen_k;
    if (Tr::kCausal) {
      // Bottom-right aligned: row i sees keys j <= i + seqlen_k - seqlen_q.
      const int row = first_row + tile::AccLayout::row(thread_in_wg, 2 * h);
      key_end = min(key_end, row + 1 + p.seqlen_k - p.seqlen_q);
    }
    visible[h] = key_end - first_thread_key;
  }
#pragma unroll
  for (int e = 0; e < N; ++e)
    if (tile::AccLayout::col_offset(e) >= visible[tile::AccLayout::half(e)]) s[e] = -INFINITY;
}

// Stands in for a half-block flag (Config::half_blocks) in kernels without half blocks:
// always false, and whatever is stored in it is dropped.
struct NoHalfFlag {
  __device__ __forceinline__ NoHalfFlag& operator=(bool) { return *this; }
  __device__ __forceinline__ constexpr operator bool() const { return false; }
};

// Pingpong (paper Section 3.1): consumer warpgroups take turns at issuing their GEMMs, in
// round-robin order, through one named barrier per warpgroup. A turn ends as soon as the
// GEMMs are issued, so the next warpgroup's GEMMs queue behind them on the tensor cores while
// this warpgroup does its softmax. Without pingpong every call is a no-op.
template <class Tr>
struct TurnScheduler {
  int wg;
  static constexpr uint32_t kThreads = 2 * 128;  // the waiting warpgroup + the one handing over

  __device__ __forceinline__ explicit TurnScheduler(int consumer_wg) : wg(consumer_wg) {
    // Warpgroup 0 goes first: its predecessor (the last one) hands it the first turn.
    if (Tr::kPingpong && wg == Tr::kConsumers - 1)
      ptx::named_barrier_arrive(kBarrierTurnBase + 0, kThreads);
  }
  __device__ __forceinline__ void begin() const {
    if (Tr::kPingpong) ptx::named_barrier_sync(kBarrierTurnBase + wg, kThreads);
  }
  __device__ __forceinline__ void end() const {
    if (Tr::kPingpong)
      ptx::named_barrier_arrive(kBarrierTurnBase + (wg + 1) % Tr::kConsumers, kThreads);
  }
};

// The mainloop state of one consumer warpgroup (query rows [64 wg, 64 wg + 64) of the block).
template <class Tr>
struct ConsumerMainloop {
  const FwdParams& p;
  const FwdSmem<Tr>& sm;
  int thread_in_wg, lane, first_row;
  uint32_t q_rows;  // this warpgroup's rows of the Q tile (of the tile's Q buffer)
  tile::OnlineSoftmax<Tr::kConditionalRescale, Tr::kRowSumMma, Tr::kIntMax> softmax;
  tile::PipelineState<Tr::kStages> next_stage;  // K/V stage of the next key block, across tiles
  bool is_loader = false;     // without warp specialization: this thread issues the loads
  InlineLoader<Tr> loader{};
  // Config::q_in_registers: this warpgroup's Q rows as the A operands of the QK^T GEMM, loaded
  // by load_q_frags once the tile's Q has landed (and every QK^T of the tile before it has
  // completed: the GEMMs read these registers while in flight).
  using QFrags = uint32_t[Tr::kHeadDim / 16][4];
  struct NoQFrags {};
  std::conditional_t<Tr::kQInRegisters, QFrags, NoQFrags> q_frags;

  __device__ __forceinline__ void load_q_frags() {
    if constexpr (Tr::kQInRegisters)
      tile::load_a_operands<typename Tr::QTile>(q_frags, q_rows, thread_in_wg);
  }

  // Config::half_blocks. A block is half-width for this warpgroup when every key in its upper
  // half is masked for all 64 of its rows (after the last row's causal diagonal, or past
  // seqlen_k): QK^T, the softmax and PV then cover the first block_n/2 keys alone. S and P
  // of the block live in the first halves of the full-width arrays (the wgmma layout of an
  // N = block_n/2 product is the first half of the N = block_n one). The other half of S is
  // left as it was and never read; the other half of P is zeroed (to_p_frag), which keeps a
  // full-width PV of the block exact and, measured, keeps ptxas from serializing the
  // kernel's wgmmas (stale P registers stay live otherwise). Half is a compile-time choice
  // of whole steps (with_half): ptxas serializes every wgmma of a kernel where one group's
  // issue is split over branches.
  __device__ __forceinline__ bool upper_half_masked(int n_block) const {
    if constexpr (!Tr::kHalfBlocks) return false;
    const int first_upper_key = n_block * Tr::kBlockN + Tr::kBlockN / 2;
    const int last_row = first_row + static_cast<int>(Tr::kRowsPerWarpgroup) - 1;
    return first_upper_key >= p.seqlen_k ||
           (Tr::kCausal && first_upper_key > last_row + p.seqlen_k - p.seqlen_q);
  }
  // The keys of a block a step covers, and the first part of S and P that holds them.
  template <bool Half>
  static constexpr int kKeys = Half ? Tr::kBlockN / 2 : Tr::kBlockN;
  template <bool Half>
  using SPart = float[kKeys<Half> / 2];
  template <bool Half>
  using PPart = uint32_t[kKeys<Half> / 16][4];
  template <bool Half>
  __device__ __forceinline__ static SPart<Half>& s_part(float (&s)[Tr::kBlockN / 2]) {
    return reinterpret_cast<SPart<Half>&>(s);
  }
  template <bool Half>
  __device__ __forceinline__ static PPart<Half>& p_part(uint32_t (&p_frag)[Tr::kBlockN / 16][4]) {
    return reinterpret_cast<PPart<Half>&>(p_frag);
  }

  // S = Q_i K_j^T for the key block in K stage `st` (one committed wgmma group, not waited).
  template <bool Half = false>
  __device__ __forceinline__ void issue_qk(float (&s)[Tr::kBlockN / 2],
                                           const tile::PipelineState<Tr::kStages>& st) {
    if constexpr (Tr::kQInRegisters)
      tile::gemm_rs_abt<Tr::kMma, kKeys<Half>, typename Tr::KVTile, Tr::kHeadDim>(
          s_part<Half>(s), q_frags, sm.k_stage(st.index));
    else
      tile::gemm_ss_abt<Tr::kMma, kKeys<Half>, typename Tr::QTile, typename Tr::KVTile>(
          s_part<Half>(s), q_rows, 0, sm.k_stage(st.index));
  }
  // O += P V_j for the key block in V stage `st` (one committed wgmma group, not waited).
  template <bool Half = false>
  __device__ __forceinline__ void issue_pv(float (&o)[Tr::kOAcc],
                                           uint32_t (&p_frag)[Tr::kBlockN / 16][4],
                                           const tile::PipelineState<Tr::kStages>& st) const {
    tile::gemm_rs_ab<Tr::kMma, Tr::kHeadDim, typename Tr::KVTile, kKeys<Half>,
                     Tr::kRowSumMma ? 8 : 0>(o, p_frag, sm.v_stage(st.index));
  }
  // Lines 18-19: for key block n_block, masks the scores (Mask: the block straddles the causal
  // diagonal or seqlen_k), turns them into P~ in place, and returns the factor O must be
  // rescaled by. Unmasked blocks carry no masking code at all.
  template <bool Mask, bool Half = false>
  __device__ __forceinline__ void softmax_block(float (&s)[Tr::kBlockN / 2], int n_block,
                                                float (&rescale)[2]) {
    if (Mask) apply_mask<Tr>(s_part<Half>(s), p, thread_in_wg, first_row, n_block * Tr::kBlockN);
    softmax.update(s_part<Half>(s), p.scale_log2, rescale);
  }
  // P~ in fp32 to the A operands of the PV GEMM, in every loop form (Half: the first half
  // of the block's, and the rest 0).
  template <bool Half = false>
  __device__ __forceinline__ static void to_p_frag(float (&s)[Tr::kBlockN / 2],
                                                   uint32_t (&p_frag)[Tr::kBlockN / 16][4]) {
    tile::acc_to_a_operands<Tr::kIsBF16, kKeys<Half>>(s_part<Half>(s), p_part<Half>(p_frag));
    if constexpr (Half)
#pragma unroll
      for (int kk = Tr::kBlockN / 32; kk < Tr::kBlockN / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) p_frag[kk][r] = 0u;
  }
  // Blocks are visited from the last to the first, and the ones that need masking are the
  // last ones: this many iterations at the start of the loop.
  __device__ __forceinline__ int masked_iterations(int n_blocks) const {
    int visible = p.seqlen_k;  // keys [0, visible) are unmasked for every row of this warpgroup
    if (Tr::kCausal) visible = min(visible, first_row + 1 + p.seqlen_k - p.seqlen_q);
    const int unmasked_blocks = visible > 0 ? visible / Tr::kBlockN : 0;
    return n_blocks - min(n_blocks, unmasked_blocks);
  }
  __device__ __forceinline__ static void rescale_o(float (&o)[Tr::kOAcc],
                                                   const float (&rescale)[2]) {
    // Config::conditional_rescale: the softmax keeps a row's max until it grows by more than
    // tile::kLazyMaxSlack, and the factor is exactly 1 until then, so a warp none of whose
    // rows moved its max skips the multiplies (after the first blocks, nearly always).
    if constexpr (Tr::kConditionalRescale)
      if (!__any_sync(0xffffffffu, rescale[0] != 1.0f || rescale[1] != 1.0f)) return;
#pragma unroll
    for (int e = 0; e < Tr::kOAcc; ++e) o[e] *= rescale[tile::AccLayout::half(e)];  // l too
  }
  // Config::row_sum_mma: lines 24-25's factors from the rows' max and the sums the PV GEMM
  // left in O's last accumulators (every one of their columns holds its row's l).
  __device__ __forceinline__ static void finalize_from_o(const float (&row_max)[2],
                                                         const float (&o)[Tr::kOAcc],
                                                         float (&inv_sum)[2], float (&lse)[2]) {
    const float l[2] = {o[Tr::kHeadDim / 2], o[Tr::kHeadDim / 2 + 2]};
    tile::row_factors(row_max, l, inv_sum, lse);
  }
  // One lane per warp hands a stage back, once the warp's wgmma reading it has completed.
  // Without warp specialization the loading thread then refills it (waiting for the others).
  __device__ __forceinline__ void release_k(const tile::PipelineState<Tr::kStages>& st) {
    if (lane == 0) sm.k_pipe.consumer_release(st);
    if constexpr (!Tr::kWarpSpecialized)
      if (is_loader) loader.load_k(p, sm);
  }
  __device__ __forceinline__ void release_v(const tile::PipelineState<Tr::kStages>& st) {
    if (lane == 0) sm.v_pipe.consumer_release(st);
    if constexpr (!Tr::kWarpSpecialized)
      if (is_loader) loader.load_v(p, sm);
  }
  // Persistent: once every QK^T GEMM of the tile has completed, Q_i may be overwritten by the
  // next tile's Q while the last PV GEMM and the epilogue run. (With O over Q the epilogue
  // releases it instead, once O's store has read it.)
  // Every thread arrives, after its own read of the buffer's tile slot: a lane-0 arrival
  // orders only lane 0's read before the producer's next write of the slot (racecheck
  // reported the other lanes' reads against it).
  __device__ __forceinline__ void release_q() const {
    if constexpr (Tr::kPersistent && !Tr::kOOverQ) ptx::mbarrier_arrive(sm.q_empty);
  }

  // Paper Algorithm 1, lines 15-23: each GEMM is waited for before the softmax that needs it.
  template <bool Mask>
  __device__ __forceinline__ void sequential_step(float (&o)[Tr::kOAcc], int n_block,
                                                  tile::PipelineState<Tr::kStages>& st,
                                                  const TurnScheduler<Tr>& turns) {
    float s[Tr::kBlockN / 2];
    sm.k_pipe.consumer_wait(st);  // line 16
    turns.begin();
    issue_qk(s, st);  // line 17
    turns.end();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(s);
    release_k(st);
    float rescale[2];
    softmax_block<Mask>(s, n_block, rescale);  // lines 18-19
    rescale_o(o, rescale);
    uint32_t p_frag[Tr::kBlockN / 16][4];
    to_p_frag(s, p_frag);
    sm.v_pipe.consumer_wait(st);  // line 20
    issue_pv(o, p_frag, st);      // line 21
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(o);
    release_v(st);  // line 22
    st.advance();
  }
  __device__ __forceinline__ void run_sequential(float (&o)[Tr::kOAcc], int n_blocks,
                                                 const TurnScheduler<Tr>& turns) {
    static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
    tile::PipelineState<Tr::kStages> st = next_stage;
    const int n_masked = masked_iterations(n_blocks);
    int it = 0;
    for (; it < n_masked; ++it) sequential_step<true>(o, n_blocks - 1 - it, st, turns);
    for (; it < n_blocks; ++it) sequential_step<false>(o, n_blocks - 1 - it, st, turns);
    release_q();
    next_stage = st;
  }

  // Config::half_blocks: calls body(std::bool_constant<half>) (half only where the kernel has
  // half-width blocks), so that each arm holds whole wgmma groups, issue to wait.
  template <class Body>
  __device__ __forceinline__ static void with_half(bool half, Body&& body) {
    if constexpr (Tr::kHalfBlocks) {
      if (half) body(std::true_type{});
      else body(std::false_type{});
    } else {
      body(std::false_type{});
    }
  }

  // The pipelined loops' opening: S = Q K^T of the first visited block (the last one),
  // issued in a turn of its own and waited for.
  template <bool Half = false>
  __device__ __forceinline__ void first_qk(float (&s)[Tr::kBlockN / 2],
                                           const tile::PipelineState<Tr::kStages>& st,
                                           const TurnScheduler<Tr>& turns) {
    sm.k_pipe.consumer_wait(st);
    turns.begin();
    issue_qk<Half>(s, st);
    turns.end();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(s);
    release_k(st);
  }
  // The pipelined loops' close: O += P V of the last block, in a turn of its own, waited for.
  // (half: the block is half-width, Config::half_blocks.)
  __device__ __forceinline__ void last_pv(float (&o)[Tr::kOAcc],
                                          uint32_t (&p_frag)[Tr::kBlockN / 16][4],
                                          const tile::PipelineState<Tr::kStages>& st,
                                          const TurnScheduler<Tr>& turns, bool half = false) {
    with_half(half, [&](auto half_tag) {
      sm.v_pipe.consumer_wait(st);
      turns.begin();
      issue_pv<decltype(half_tag)::value>(o, p_frag, st);
      turns.end();
      ptx::wgmma_wait_group<0>();
      tile::pin_registers(o);
      release_v(st);
    });
  }
  // Paper Algorithm 2, lines 3-6: first_qk, then its m, P and l. O is still 0: the rescale
  // factor it leaves behind (0) changes nothing. Returns whether the block was half-width.
  __device__ __forceinline__ bool first_block(float (&s)[Tr::kBlockN / 2],
                                              uint32_t (&p_frag)[Tr::kBlockN / 16][4],
                                              float (&rescale)[2],
                                              const tile::PipelineState<Tr::kStages>& st,
                                              int n_block, bool masked,
                                              const TurnScheduler<Tr>& turns) {
    const bool half = masked && upper_half_masked(n_block);
    with_half(half, [&](auto half_tag) {
      constexpr bool kHalf = decltype(half_tag)::value;
      first_qk<kHalf>(s, st, turns);
      if (masked) softmax_block<true, kHalf>(s, n_block, rescale);
      else softmax_block<false>(s, n_block, rescale);
      to_p_frag<kHalf>(s, p_frag);
    });
    return half;
  }

  // Paper Algorithm 2, lines 3-19: the QK^T of block j is issued together with the PV of
  // block j-1 (S_next and P_cur live in registers side by side), and the softmax of block j
  // is placed before the wait for the PV GEMM. ptxas, however, hoists that wait to just after
  // the row max, so only the max runs under the GEMM (fa3-sass shows it; bench/NOTES.md v2);
  // run_double_p below is the form whose softmax stays under the GEMM.
  struct Pipelined {
    float s[Tr::kBlockN / 2];                   // S_next, then P_next in fp32
    uint32_t p_frag[Tr::kBlockN / 16][4];       // P_cur as the A operand of the PV GEMM
    float rescale[2];                           // O's factor from the latest softmax
    tile::PipelineState<Tr::kStages> k_st;      // stage of the block whose QK^T is issued next
    tile::PipelineState<Tr::kStages> v_st;      // stage of the block P_cur belongs to
    // half_blocks: P_cur's block is half-width. (Other kernels carry no flag at all: their
    // code stays what it was without half blocks.)
    std::conditional_t<Tr::kHalfBlocks, bool, NoHalfFlag> p_half{};
  };

  // Lines 8-16 around two hooks: QK^T of the block in stage x.k_st and PV of P_cur (V in
  // x.v_st) in one turn; softmax_and_wait() softmaxes S_next and ends with the wait for the
  // PV GEMM (lines 13-14); after_pv() runs once O is complete, before P_next is converted.
  // QkHalf, PvHalf (Config::half_blocks): S_next's block, P_cur's block is half-width.
  template <bool QkHalf = false, bool PvHalf = false, class SoftmaxAndWait, class AfterPv>
  __device__ __forceinline__ void step(float (&o)[Tr::kOAcc], Pipelined& x,
                                       const TurnScheduler<Tr>& turns,
                                       SoftmaxAndWait&& softmax_and_wait, AfterPv&& after_pv) {
    // Without warp specialization ptxas keeps the stages per thread (see three_stage_step).
    if constexpr (!Tr::kWarpSpecialized) {
      x.k_st = warp_uniform(x.k_st);
      x.v_st = warp_uniform(x.v_st);
    }
    sm.k_pipe.consumer_wait(x.k_st);  // line 8
    sm.v_pipe.consumer_wait(x.v_st);  // line 10
    turns.begin();
    issue_qk<QkHalf>(x.s, x.k_st);          // line 9: S_next, not waited for
    issue_pv<PvHalf>(o, x.p_frag, x.v_st);  // line 11: O += P_cur V_{j-1}, not waited for
    turns.end();
    ptx::wgmma_wait_group<1>();  // line 12: the older group, S_next, is done
    tile::pin_registers(x.s);
    release_k(x.k_st);
    softmax_and_wait();  // lines 13-14
    release_v(x.v_st);   // line 15
    after_pv();
    to_p_frag<QkHalf>(x.s, x.p_frag);  // line 16
    x.v_st = x.k_st;
    x.k_st.advance();
    x.p_half = QkHalf;
  }

  // Lines 8-16 for key block n_block. Config::half_blocks: a masked block may be half-width,
  // and so may the block before it in visiting order (PvMayBeHalf), whose PV this step issues.
  template <bool Mask, bool PvMayBeHalf = Mask>
  __device__ __forceinline__ void pipelined_step(float (&o)[Tr::kOAcc], int n_block,
                                                 Pipelined& x, const TurnScheduler<Tr>& turns) {
    // A half block's P is zero past its first half (to_p_frag), so a full-width PV of it is
    // exact: masked steps, rare in the loop, get arms for their QK^T only (fewer copies of
    // the step, less code for the instruction cache).
    if constexpr (Mask) {
      with_half(upper_half_masked(n_block), [&](auto qk_tag) {
        pipelined_step_as<true, decltype(qk_tag)::value, false>(o, n_block, x, turns);
      });
    } else if constexpr (PvMayBeHalf) {
      with_half(x.p_half, [&](auto pv_tag) {
        pipelined_step_as<false, false, decltype(pv_tag)::value>(o, n_block, x, turns);
      });
    } else {
      pipelined_step_as<false, false, false>(o, n_block, x, turns);
    }
  }
  template <bool Mask, bool QkHalf, bool PvHalf>
  __device__ __forceinline__ void pipelined_step_as(float (&o)[Tr::kOAcc], int n_block,
                                                    Pipelined& x, const TurnScheduler<Tr>& turns) {
    static_assert(Mask || !QkHalf, "only a masked block is half-width");
    step<QkHalf, PvHalf>(o, x, turns, [&] {
      if constexpr (Tr::kExpAfterPvWait) {
        // Line 13 in two halves: the row max under the PV GEMM, the exponentials after it.
        if (Mask) apply_mask<Tr>(x.s, p, thread_in_wg, first_row, n_block * Tr::kBlockN);
        float base[2];
        softmax.update_max(x.s, p.scale_log2, base, x.rescale);
        ptx::wgmma_wait_group<0>();  // line 14
        tile::pin_registers(o);
        // + 0 * (an accumulator of each row): the exponentials cannot start before the wait.
        // (__fmul_rn, not a bit mask: reading an accumulator as an integer made ptxas
        // serialize the wgmmas.) seqlen_q > 0, so the factor is +0 at run time.
        const float zero = static_cast<float>(p.seqlen_q >> 31);
        base[0] += __fmul_rn(o[0], zero);
        base[1] += __fmul_rn(o[2], zero);
        softmax.update_exp(x.s, p.scale_log2, base, x.rescale);
      } else {
        softmax_block<Mask, QkHalf>(x.s, n_block, x.rescale);  // line 13, under the PV GEMM
        ptx::wgmma_wait_group<0>();                            // line 14
        tile::pin_registers(o);
      }
    }, [&] { rescale_o(o, x.rescale); });
  }

  // Descending, the masked blocks are the first n_masked visited; ascending, the last.
  __device__ __forceinline__ static bool first_visited_masked(int n_blocks, int n_masked) {
    return Tr::kAscending ? n_masked == n_blocks : n_masked > 0;
  }
  // Lines 3-6 for a tile of n_blocks > 0 key blocks (n_masked of them masked): x.k_st is the
  // stage of its first block.
  __device__ __forceinline__ void open_tile(Pipelined& x, int n_blocks, int n_masked,
                                            const TurnScheduler<Tr>& turns) {
    x.p_half = first_block(x.s, x.p_frag, x.rescale, x.k_st, visited_block<Tr>(0, n_blocks),
                           first_visited_masked(n_blocks, n_masked), turns);
    x.v_st = x.k_st;
    x.k_st.advance();
  }
  // Lines 7-17: the steps after open_tile. Leaves the last block's PV to the caller.
  __device__ __forceinline__ void pipelined_steps(float (&o)[Tr::kOAcc], int n_blocks,
                                                  int n_masked, Pipelined& x,
                                                  const TurnScheduler<Tr>& turns) {
    int it = 1;  // line 7
    if constexpr (Tr::kAscending) {
      for (; it < n_blocks - n_masked; ++it) pipelined_step<false>(o, it, x, turns);
      for (; it < n_blocks; ++it) pipelined_step<true>(o, it, x, turns);
    } else {
      for (; it < n_masked; ++it) pipelined_step<true>(o, n_blocks - 1 - it, x, turns);
      // The first unmasked step issues the PV of the last masked block (visited by the loop
      // above, or first: by open_tile or a boundary step).
      if constexpr (Tr::kHalfBlocks)
        if (it < n_blocks) pipelined_step<false, true>(o, n_blocks - 1 - it++, x, turns);
      for (; it < n_blocks; ++it) pipelined_step<false>(o, n_blocks - 1 - it, x, turns);
    }
  }

  __device__ __forceinline__ void run_pipelined(float (&o)[Tr::kOAcc], int n_blocks,
                                                const TurnScheduler<Tr>& turns) {
    Pipelined x;
    x.k_st = next_stage;
    const int n_masked = masked_iterations(n_blocks);
    open_tile(x, n_blocks, n_masked, turns);
    pipelined_steps(o, n_blocks, n_masked, x, turns);
    // Lines 18-19: the last PV.
    release_q();
    last_pv(o, x.p_frag, x.v_st, turns, x.p_half);
    next_stage = x.k_st;
  }

  // Config::cross_tile: the last PV of one tile (P in x.p_frag, V in stage x.v_st) and the
  // first QK^T of the next (on q_rows, K in stage x.k_st) in one turn, as a pipelined step
  // does within a tile; the next tile's first softmax (its state already reset) runs under
  // the PV, then `epilogue` finishes the previous tile's O once the PV is done (and leaves
  // O zeroed for the next tile).
  template <class Epilogue>
  __device__ __forceinline__ void boundary_step(float (&o)[Tr::kOAcc], int next_n_blocks,
                                                int next_n_masked, Pipelined& x,
                                                const TurnScheduler<Tr>& turns,
                                                Epilogue&& epilogue) {
    // (upper_half_masked reads the rows of the next tile: enter_tile has set them. The
    // previous tile's last PV goes at full width: exact, see pipelined_step.)
    const bool qk_half = Tr::kHalfBlocks && first_visited_masked(next_n_blocks, next_n_masked) &&
                         upper_half_masked(visited_block<Tr>(0, next_n_blocks));
    with_half(qk_half, [&](auto qk_tag) {
      constexpr bool kQkHalf = decltype(qk_tag)::value;
      step<kQkHalf, false>(o, x, turns, [&] {
        const int n_block = visited_block<Tr>(0, next_n_blocks);
        if (first_visited_masked(next_n_blocks, next_n_masked))
          softmax_block<true, kQkHalf>(x.s, n_block, x.rescale);
        else softmax_block<false>(x.s, n_block, x.rescale);
        ptx::wgmma_wait_group<0>();
        tile::pin_registers(o);
      }, epilogue);
    });
  }

  // Algorithm 2 in the order of the paper's Appendix B.2 SASS (Config::b2_order). A step
  // starts with the softmax of the block whose S is complete (the previous step's wait), then
  // issues QK^T of the next block, rescales O while that GEMM runs, issues the PV of the
  // softmaxed block and waits for both. ptxas lays this out as B.2 shows: softmax first, the
  // O rescale between the QK^T HGMMAs, the PV HGMMAs packed, one wait at the end. Measured
  // 1-5% slower than run_pipelined on an H100 (bench/NOTES.md v6): the row max no longer
  // runs under the PV GEMM, and the rescale holds the pingpong turn longer.
  template <bool Mask>
  __device__ __forceinline__ void b2_step(float (&o)[Tr::kOAcc], int n_block_done,
                                          Pipelined& x, const TurnScheduler<Tr>& turns) {
    softmax_block<Mask>(x.s, n_block_done, x.rescale);
    to_p_frag(x.s, x.p_frag);
    sm.k_pipe.consumer_wait(x.k_st);
    sm.v_pipe.consumer_wait(x.v_st);
    turns.begin();
    issue_qk(x.s, x.k_st);          // S of the next block
    rescale_o(o, x.rescale);        // PV_{j-1} completed at the previous step's wait
    issue_pv(o, x.p_frag, x.v_st);  // O += P_j V_j
    turns.end();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(x.s);
    tile::pin_registers(o);
    release_k(x.k_st);
    release_v(x.v_st);
    x.v_st = x.k_st;
    x.k_st.advance();
  }
  __device__ __forceinline__ void run_b2_order(float (&o)[Tr::kOAcc], int n_blocks,
                                               const TurnScheduler<Tr>& turns) {
    static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
    Pipelined x;
    x.k_st = next_stage;
    const int n_masked = masked_iterations(n_blocks);
    first_qk(x.s, x.k_st, turns);  // its softmax opens step 1
    x.v_st = x.k_st;
    x.k_st.advance();
    // Step it softmaxes block it - 1, which needs the mask if it - 1 < n_masked.
    int it = 1;
    for (; it < n_blocks && it <= n_masked; ++it) b2_step<true>(o, n_blocks - it, x, turns);
    for (; it < n_blocks; ++it) b2_step<false>(o, n_blocks - it, x, turns);
    // The last block's softmax and PV.
    release_q();
    if (n_masked == n_blocks) softmax_block<true>(x.s, 0, x.rescale);
    else softmax_block<false>(x.s, 0, x.rescale);
    to_p_frag(x.s, x.p_frag);
    rescale_o(o, x.rescale);
    last_pv(o, x.p_frag, x.v_st, turns);
    next_stage = x.k_st;
  }

  // Algorithm 2 with P in two register buffers (Config::double_p). Step j issues QK^T_j,
  // then waits (wait_group 1) for PV_{j-2}, rescales O, issues PV_{j-1} with P_{j-1}, and
  // runs softmax_j under it, writing P_j into the other buffer. The loop holds no
  // wait_group 0: the only wait for a PV comes after the next QK^T is issued, a point ptxas
  // cannot move it from, so the softmax stays under the PV GEMM.
  using PFrag = uint32_t[Tr::kBlockN / 16][4];
  struct DoubleP {
    float s[Tr::kBlockN / 2];
    PFrag p_a, p_b;
    float rescale[2];                       // from the latest softmax, for O before its PV
    tile::PipelineState<Tr::kStages> k_st;  // stage of the block whose QK^T is issued next
    tile::PipelineState<Tr::kStages> v_cur; // stage of P_cur's block (PV issued this step)
    tile::PipelineState<Tr::kStages> v_old; // stage of the block before it (its PV in flight)
    bool pv_in_flight = false;              // whether a PV (of v_old's block) is pending
  };

  template <bool Mask>
  __device__ __forceinline__ void double_p_step(float (&o)[Tr::kOAcc], int n_block,
                                                DoubleP& x, PFrag& p_cur, PFrag& p_next,
                                                const TurnScheduler<Tr>& turns) {
    sm.k_pipe.consumer_wait(x.k_st);
    sm.v_pipe.consumer_wait(x.v_cur);
    turns.begin();
    issue_qk(x.s, x.k_st);        // QK^T_j
    ptx::wgmma_wait_group<1>();   // the older group, PV_{j-2}, is done (if there was one)
    tile::pin_registers(o);
    if (x.pv_in_flight) release_v(x.v_old);
    rescale_o(o, x.rescale);      // O_{j-2} -> relative to m_{j-1}
    issue_pv(o, p_cur, x.v_cur);  // O += P_{j-1} V_{j-1}
    turns.end();
    ptx::wgmma_wait_group<1>();   // QK^T_j is done; PV_{j-1} stays in flight
    tile::pin_registers(x.s);
    release_k(x.k_st);
    softmax_block<Mask>(x.s, n_block, x.rescale);  // under PV_{j-1}
    to_p_frag(x.s, p_next);
    x.pv_in_flight = true;
    x.v_old = x.v_cur;
    x.v_cur = x.k_st;
    x.k_st.advance();
  }

  // The last PV, with P_last in p_last.
  __device__ __forceinline__ void double_p_finish(float (&o)[Tr::kOAcc], DoubleP& x,
                                                  PFrag& p_last,
                                                  const TurnScheduler<Tr>& turns) {
    release_q();
    sm.v_pipe.consumer_wait(x.v_cur);
    turns.begin();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(o);
    if (x.pv_in_flight) release_v(x.v_old);
    rescale_o(o, x.rescale);
    issue_pv(o, p_last, x.v_cur);
    turns.end();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(o);
    release_v(x.v_cur);
  }

  // How many of the steps it = 1 .. n_blocks - 1 (the blocks after the first) need the mask.
  __device__ __forceinline__ int masked_steps(int n_blocks) const {
    return min(n_blocks - 1, max(0, masked_iterations(n_blocks) - 1));
  }
  // Runs step(Bool<mask>, Bool<parity>, it) for the steps it = 1 .. steps of a loop whose
  // register buffers alternate between steps: in pairs of parity 0 then 1, so each buffer
  // stays a compile-time name. Steps 1 .. masked need the mask: the masked pairs round that
  // up to even (masking an extra block is harmless) unless that passes the last step; then
  // the last step is a lone one and takes the mask itself. Returns whether `steps` was odd.
  template <class Step>
  __device__ __forceinline__ static bool paired_steps(int steps, int masked, Step&& step) {
    using T = std::true_type;
    using F = std::false_type;
    const int masked_pairs_end = min(steps, (masked + 1) & ~1);
    int it = 1;
    for (; it + 1 <= masked_pairs_end; it += 2) {
      step(T{}, F{}, it);
      step(T{}, T{}, it + 1);
    }
    for (; it + 1 <= steps; it += 2) {
      step(F{}, F{}, it);
      step(F{}, T{}, it + 1);
    }
    if (it > steps) return false;
    if (it <= masked) step(T{}, F{}, it);
    else step(F{}, F{}, it);
    return true;
  }
  template <bool Second, class Buf>
  __device__ __forceinline__ static Buf& pick(Buf& first, Buf& second) {
    if constexpr (Second) return second;
    else return first;
  }

  __device__ __forceinline__ void run_double_p(float (&o)[Tr::kOAcc], int n_blocks,
                                               const TurnScheduler<Tr>& turns) {
    static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
    DoubleP x;
    x.k_st = next_stage;
    first_block(x.s, x.p_a, x.rescale, x.k_st, n_blocks - 1, masked_iterations(n_blocks) > 0, turns);
    x.v_cur = x.k_st;
    x.k_st.advance();
    // Step of parity 0 issues PV with p_a and writes the new P into p_b; parity 1 the reverse.
    const bool odd = paired_steps(n_blocks - 1, masked_steps(n_blocks), [&](auto mask, auto parity, int it) {
      constexpr bool kOne = decltype(parity)::value;
      double_p_step<decltype(mask)::value>(o, n_blocks - 1 - it, x, pick<kOne>(x.p_a, x.p_b),
                                           pick<kOne>(x.p_b, x.p_a), turns);
    });
    // (Branches, not a selected reference: registers cannot be indexed at run time.)
    if (odd) double_p_finish(o, x, x.p_b, turns);
    else double_p_finish(o, x, x.p_a, turns);
    next_stage = x.k_st;
  }

  // Paper Algorithm 4 (Config::three_stage): step j issues QK^T_{j+1} and PV_{j-1}, and runs
  // the softmax of block j, whose S the previous step computed, under both. Two S and two P
  // buffers alternate between steps.
  struct ThreeStage {
    float s_a[Tr::kBlockN / 2], s_b[Tr::kBlockN / 2];
    PFrag p_a, p_b;
    float rescale[2];                       // from the latest softmax, for O before its PV
    tile::PipelineState<Tr::kStages> k_st;  // stage of block j+1 (its QK^T is issued next)
    tile::PipelineState<Tr::kStages> v_st;  // stage of block j-1 (its PV is issued next)
  };

  // HasNext: a compile-time choice, as a conditional wgmma makes ptxas serialize them all.
  template <bool Mask, bool HasNext>
  __device__ __forceinline__ void three_stage_step(float (&o)[Tr::kOAcc], int it,
                                                   int n_blocks, ThreeStage& x,
                                                   float (&s_cur)[Tr::kBlockN / 2],
                                                   float (&s_next)[Tr::kBlockN / 2],
                                                   PFrag& p_cur, PFrag& p_next,
                                                   const TurnScheduler<Tr>& turns) {
    // ptxas kept both stages of this loop in per-thread registers, every lane holding the
    // same one: each wgmma descriptor was rebuilt in vector registers and moved over with
    // R2UR every step (fa3-sass uniform_operands; bench/NOTES.md v12). From lane 0 they are
    // warp-uniform to it.
    x.k_st = warp_uniform(x.k_st);
    x.v_st = warp_uniform(x.v_st);
    if (HasNext) sm.k_pipe.consumer_wait(x.k_st);  // Algorithm 4 line 8
    sm.v_pipe.consumer_wait(x.v_st);               // line 10
    turns.begin();
    if (HasNext) issue_qk(s_next, x.k_st);  // line 9: S_next, not waited for
    rescale_o(o, x.rescale);                 // line 11
    issue_pv(o, p_cur, x.v_st);              // line 12: O += P_{j-1} V_{j-1}, not waited for
    turns.end();
    softmax_block<Mask>(s_cur, n_blocks - 1 - it, x.rescale);  // line 13, under both GEMMs
    to_p_frag(s_cur, p_next);
    ptx::wgmma_wait_group<0>();  // line 14
    tile::pin_registers(o);
    if (HasNext) {
      tile::pin_registers(s_next);
      release_k(x.k_st);
      x.k_st.advance();
    }
    release_v(x.v_st);
    x.v_st.advance();
  }

  __device__ __forceinline__ void run_three_stage(float (&o)[Tr::kOAcc], int n_blocks,
                                                  const TurnScheduler<Tr>& turns) {
    static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
    ThreeStage x;
    x.v_st = next_stage;
    x.k_st = next_stage;
    // Lines 2-6: S_0, then S_1 in flight while the softmax of block 0 runs.
    first_qk(x.s_a, x.k_st, turns);
    x.k_st.advance();
    const bool second = n_blocks > 1;
    if (second) {
      sm.k_pipe.consumer_wait(x.k_st);
      turns.begin();
      issue_qk(x.s_b, x.k_st);
      turns.end();
    }
    if (masked_iterations(n_blocks) > 0) softmax_block<true>(x.s_a, n_blocks - 1, x.rescale);
    else softmax_block<false>(x.s_a, n_blocks - 1, x.rescale);
    to_p_frag(x.s_a, x.p_a);
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(x.s_b);
    if (second) {
      release_k(x.k_st);
      x.k_st.advance();
    }
    // Lines 7-17 for blocks 1 .. n_blocks - 2, each with a next block. Parity 0: S_j in s_b,
    // S_{j+1} into s_a, P_{j-1} in p_a, P_j into p_b.
    const int masked = masked_steps(n_blocks);
    auto step = [&](auto mask, auto parity, int it, auto has_next) {
      constexpr bool kOne = decltype(parity)::value;
      three_stage_step<decltype(mask)::value, decltype(has_next)::value>(
          o, it, n_blocks, x, pick<kOne>(x.s_b, x.s_a), pick<kOne>(x.s_a, x.s_b),
          pick<kOne>(x.p_a, x.p_b), pick<kOne>(x.p_b, x.p_a), turns);
    };
    // The last block's step (no next QK^T), then lines 18-24, the last PV, with P_last in
    // `p_last`.
    auto finish = [&](auto& p_last) {
      release_q();
      sm.v_pipe.consumer_wait(x.v_st);
      turns.begin();
      rescale_o(o, x.rescale);
      issue_pv(o, p_last, x.v_st);
      turns.end();
      ptx::wgmma_wait_group<0>();
      tile::pin_registers(o);
      release_v(x.v_st);
    };
    using T = std::true_type;
    using F = std::false_type;
    if (n_blocks == 1) {
      finish(x.p_a);
    } else {
      const bool odd = paired_steps(n_blocks - 2, min(masked, n_blocks - 2),
                                    [&](auto mask, auto parity, int it) { step(mask, parity, it, T{}); });
      const int last = n_blocks - 1;
      // (Branches, not selected references: registers cannot be indexed at run time.)
      if (odd) {
        if (last <= masked) step(T{}, T{}, last, F{});
        else step(F{}, T{}, last, F{});
        finish(x.p_a);
      } else {
        if (last <= masked) step(T{}, F{}, last, F{});
        else step(F{}, F{}, last, F{});
        finish(x.p_b);
      }
    }
    next_stage = x.k_st;
  }
};

// Lines 24-25 for the CTA's k-th tile: O_i = diag(l)^-1 O_i and L_i. O_i goes to shared
// memory and one thread stores it with TMA (which clips the rows past seqlen_q).
// Non-persistent: O_i goes over this warpgroup's own Q rows (its last wgmma reading them has
// completed). Persistent: into the O tile, once the store of the previous tile has read it;
// nobody waits for this store until the next tile's epilogue (or the end of the kernel).
// Persistent with O over Q: over the Q rows of the tile's Q buffer, which is handed back to
// the producer once the store has read them.
template <class Tr>
__device__ __forceinline__ void fwd_epilogue(const FwdParams& p, const FwdSmem<Tr>& sm,
                                             const FwdWork<Tr>& w, int wg, int k, int first_row,
                                             int thread_in_wg, const float (&inv_sum)[2],
                                             const float (&lse)[2],
                                             float (&o)[Tr::kOAcc]) {
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
  // Config::three_q_buffers: every thread but the storing one is done with this Q buffer (its
  // tile slot, its O rows written); its arrival is the thread's own, as racecheck wants it.
  if constexpr (Tr::kLateQRelease)
    if (thread_in_wg != 0) ptx::mbarrier_arrive(sm.q_empty_bar(k));
  if (!Tr::kQWarpStoresO && thread_in_wg == 0) {
    // Config::three_q_buffers: the previous tile's O store has had this tile's key blocks to
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

// Config::cross_tile: the tiles of a persistent CTA as one pipeline. A tile's last PV GEMM
// goes out in one turn with the next tile's first QK^T (on the other Q buffer), and the
// tile's epilogue runs after the next tile's first softmax, under nobody's GEMM but the
// other warpgroups': the tensor cores see the tile boundary as one more step. The softmax
// state of a tile is final before the next one's first softmax (finalize), so only O is
// carried into the next tile, until its epilogue.
template <class Tr>
__device__ __forceinline__ void fwd_consumer_cross_tile(const FwdParams& p, const FwdSmem<Tr>& sm,
                                                        int wg, ConsumerMainloop<Tr>& loop,
                                                        const TurnScheduler<Tr>& turns) {
  using Loop = ConsumerMainloop<Tr>;
  const uint32_t wg_rows = Tr::warpgroup_rows_offset(wg);
  // Makes the k-th tile, w, the loop's current one (its Q landed, its rows, a fresh softmax);
  // returns how many of its key blocks need the mask.
  auto enter_tile = [&](int k, const FwdWork<Tr>& w) {
    if constexpr (!Tr::kDynamic) tile::mbarrier_wait(sm.q_full_bar(k), sm.q_parity(k));
    loop.q_rows = sm.q_buffer(k) + wg_rows;
    loop.load_q_frags();  // (every QK^T of the tile before has completed by now)
    loop.first_row = w.first_row(wg);
    loop.softmax.init();
    return loop.masked_iterations(w.n_blocks);
  };
  int k = 0;
  FwdWork<Tr> w;
  if (consumer_work_at<Tr>(p, sm, k, &w) >= p.num_tiles) return;
  int n_masked = enter_tile(k, w);
  float o[Tr::kOAcc];
  tile::fill(o, 0.0f);
  typename Loop::Pipelined x;
  x.k_st = loop.next_stage;
  if (w.n_blocks > 0) loop.open_tile(x, w.n_blocks, n_masked, turns);
  for (;;) {
    x.k_st = warp_uniform(x.k_st);
    x.v_st = warp_uniform(x.v_st);
    if (w.n_blocks > 0) loop.pipelined_steps(o, w.n_blocks, n_masked, x, turns);
    // Every QK^T of tile k is done; its last PV (if it has keys) is still to go out.
    // Row sums in O (row_sum_mma): 1/l and the LSE wait for the tile's last PV; keep m.
    float inv_sum[2], lse[2], row_max[2];
    if constexpr (Tr::kRowSumMma) loop.softmax.copy_max(row_max);
    else loop.softmax.finalize(inv_sum, lse);
    const int first_row = loop.first_row;
    FwdWork<Tr> next = w;
    const bool more = consumer_work_at<Tr>(p, sm, k + 1, &next) < p.num_tiles;
    if (more) n_masked = enter_tile(k + 1, next);
    if (more && w.n_blocks > 0 && next.n_blocks > 0) {
      loop.boundary_step(o, next.n_blocks, n_masked, x, turns, [&] {
        if constexpr (Tr::kRowSumMma) Loop::finalize_from_o(row_max, o, inv_sum, lse);
        fwd_epilogue<Tr>(p, sm, w, wg, k, first_row, loop.thread_in_wg, inv_sum, lse, o);
        tile::fill(o, 0.0f);
      });
    } else {
      if (w.n_blocks > 0) loop.last_pv(o, x.p_frag, x.v_st, turns, x.p_half);
      if constexpr (Tr::kRowSumMma) Loop::finalize_from_o(row_max, o, inv_sum, lse);
      fwd_epilogue<Tr>(p, sm, w, wg, k, first_row, loop.thread_in_wg, inv_sum, lse, o);
      if (!more) break;
      tile::fill(o, 0.0f);
      if (next.n_blocks > 0) loop.open_tile(x, next.n_blocks, n_masked, turns);
    }
    w = next;
    ++k;
  }
}

// Paper Algorithm 1, lines 11-25 (Algorithm 2 or 4 with overlap), for consumer warpgroup
// `wg`, for every tile of this CTA.
template <class Tr>
__device__ __forceinline__ void fwd_consumer(const FwdParams& p, const FwdSmem<Tr>& sm, int wg) {
  const int thread_in_wg = static_cast<int>(threadIdx.x % 128);
  const uint32_t wg_rows = Tr::warpgroup_rows_offset(wg);
  const TurnScheduler<Tr> turns(wg);
  ConsumerMainloop<Tr> loop{p, sm, thread_in_wg, thread_in_wg % 32, 0, sm.q + wg_rows, {}, {}};
  loop.is_loader = !Tr::kWarpSpecialized && threadIdx.x == 0;
  if constexpr (Tr::kCrossTile) {
    fwd_consumer_cross_tile<Tr>(p, sm, wg, loop, turns);
  } else {
    consumer_tiles<Tr>(p, sm, [&](int tile, int k) {
      const FwdWork<Tr> w(p, tile);
      if constexpr (Tr::kPersistent) loop.next_stage = warp_uniform(loop.next_stage);
      if constexpr (!Tr::kWarpSpecialized)
        if (loop.is_loader) loop.loader.start(p, sm, w);
      loop.first_row = w.first_row(wg);
      // Line 13.
      float o[Tr::kOAcc];
      tile::fill(o, 0.0f);
      loop.softmax.init();
      if constexpr (!Tr::kDynamic) tile::mbarrier_wait(sm.q_full_bar(k), sm.q_parity(k));  // line 14
      if (w.n_blocks > 0) {
        if constexpr (Tr::kThreeStage) loop.run_three_stage(o, w.n_blocks, turns);
        else if constexpr (Tr::kDoubleP) loop.run_double_p(o, w.n_blocks, turns);
        else if constexpr (Tr::kB2Order) loop.run_b2_order(o, w.n_blocks, turns);
        else if constexpr (Tr::kOverlap) loop.run_pipelined(o, w.n_blocks, turns);
        else loop.run_sequential(o, w.n_blocks, turns);
      } else {
        loop.release_q();
      }
      float inv_sum[2], lse[2];
      if constexpr (Tr::kRowSumMma)
        ConsumerMainloop<Tr>::finalize_from_o(loop.softmax.row_max, o, inv_sum, lse);
      else loop.softmax.finalize(inv_sum, lse);
      fwd_epilogue<Tr>(p, sm, w, wg, k, loop.first_row, thread_in_wg, inv_sum, lse, o);
    });
  }
  // Shared memory must outlive the reads of the last O store.
  if (thread_in_wg == 0) ptx::bulk_wait_group_read<0>();
}

template <class C>
__device__ __forceinline__ void fwd_kernel(const FwdParams& p) {
  using Tr = FwdTraits<C>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The dynamic shared-memory base is only guaranteed 16-byte aligned; swizzled tiles need
  // 1024 (FwdSmemLayout reserves the slack).
  const uint32_t base = (ptx::smem_address(smem_raw) + 1023u) & ~1023u;
  const FwdSmem<Tr> sm(base);

  if (threadIdx.x == 0) {
    for (int b = 0; b < Tr::kQBuffers; ++b) {
      ptx::mbarrier_init(sm.q_full_bar(b), 1);
      // Every consumer thread's arrival (release_q, fwd_epilogue).
      ptx::mbarrier_init(sm.q_empty_bar(b), 128 * Tr::kConsumers);
      if constexpr (Tr::kQWarp) ptx::mbarrier_init(sm.tile_ready_bar(b), 1);
    }
    if constexpr (Tr::kQWarp) ptx::mbarrier_init(sm.draw_go, 1);
    sm.k_pipe.init(4 * Tr::kConsumers);
    sm.v_pipe.init(4 * Tr::kConsumers);
    ptx::fence_mbarrier_init();
  }
  if constexpr (Tr::kRowSumMma) {
    // Every V stage's chunk after its head_dim columns: 16-bit ones (the PV GEMM's 8 extra
    // columns read the first 8 of them), written before the barrier below, read by wgmma.
    constexpr uint32_t kOnePair = Tr::kIsBF16 ? 0x3f803f80u : 0x3c003c00u;
    for (int st = 0; st < Tr::kStages; ++st)
      for (uint32_t i = threadIdx.x; i < Tr::KVTile::kChunkBytes / 4; i += blockDim.x)
        ptx::st_shared_u32(sm.v_stage(st) + Tr::KVTile::kBytes + 4 * i, kOnePair);
    ptx::fence_proxy_async_shared();
  }
  // In a cluster, the other CTAs' loads and releases reach this CTA's barriers: all must be
  // initialized first.
  if constexpr (Tr::kCluster > 1) {
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  } else {
    __syncthreads();
  }

  // Warp-uniform to the compiler, not only in fact: a consumer's first row, and from it
  // (causal) how many of its key blocks take the mask, depend on it. Read from threadIdx,
  // it made ptxas keep the loop counts, and so the K/V stage index and phase and every
  // wgmma descriptor, in per-thread registers (R2UR, LOP3 and IMAD.MOV per GEMM: 11% more
  // instructions per key block in the causal d128 kernel than the non-causal one, ncu;
  // bench/NOTES.md v10).
  const int warpgroup = warp_uniform(static_cast<int>(threadIdx.x / 128));
  if constexpr (!Tr::kWarpSpecialized) {
    fwd_consumer<Tr>(p, sm, warpgroup);
  } else if (warpgroup == 0) {
    // Line 3: the producer needs few registers; give them to the consumers.
    ptx::setmaxnreg_dec<Tr::kProducerRegs>();
    if (threadIdx.x == 0) fwd_producer<Tr>(p, sm);
    if (Tr::kQWarp && threadIdx.x == 32) fwd_q_loader<Tr>(p, sm);
  } else {
    ptx::setmaxnreg_inc<Tr::kConsumerRegs>();  // line 12
    fwd_consumer<Tr>(p, sm, warpgroup - 1);
  }
  // A CTA's shared memory must outlive the other CTAs' releases of its stages (arrivals on
  // its empty barriers): no CTA exits before every CTA of the cluster is done.
  if constexpr (Tr::kCluster > 1) {
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  }
}

}  // namespace fa3
