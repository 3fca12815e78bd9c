// FlashAttention-3 backward (paper Algorithm 3), warp-specialized.
//
// One CTA owns block_n keys (128; 80 at head dim 256, 64 in the lab's _kvh) of one (batch,
// K/V head): their K_j and V_j are loaded once, and dK_j, dV_j stay in registers while the CTA
// walks every query block of every query head of the K/V head's group (GQA/MQA: the group's
// sum needs no atomics and no copy of K/V); at the end they go out through K_j's and V_j's
// tiles by TMA stores.
//   warpgroup 0, warp 0   the producer: K_j and V_j, then Q_i, dO_i (TMA) and LSE_i, D_i (bulk
//                         copies) of each step into an s-stage pipeline (lines 4-12); with
//                         one stage, dO_i and D_i on a barrier of their own (split_qdo_barriers)
//   warpgroup 0, warp 1   the dQ writer: adds each step's dQ parts into the fp32 accumulator
//                         of the workspace with bulk reduce-adds from shared memory, one per
//                         warpgroup's part (line 33); with ordered adds (the deterministic
//                         mode, small causal calls) after the K/V blocks ranked before it
//                         (K/V block order, or the last block's first: _lf)
//   warpgroups 1..2       consumers, 64 keys each: S^T = K Q^T and dP^T = V dO^T (SS-wgmma,
//                         keys as M, so that P^T and dS^T come out in the accumulator layout
//                         of the RS-wgmma A operand), P^T = exp(S^T - L), dS^T = P^T (dP^T - D),
//                         dV += P^T dO and dK += dS^T Q (RS-wgmma), dS^T to shared memory and
//                         their part of dQ_i = dS K (SS-wgmma with a transposed A; by keys,
//                         head-dim columns or query rows, or with _dqt by head-dim rows of
//                         dQ_i^T = K^T dS^T: DqSplit, bwd_config.h), staged in
//                         fragment order for the writer (DqAccumLayout). With _kvh (head dim
//                         256) they share the keys instead: S^T, dP^T of 32 queries each, P^T
//                         and dS^T through shared memory, dK, dV, dQ of 128 columns each (SS).
//                         With _kvt (head dim 256, 80 keys; bwd_consumer_transposed) S and dP
//                         of 40 keys each, not transposed, and dK^T, dV^T of 128 columns each.
//   (_pt)                 one CTA per SM walks tiles drawn from a counter (bwd_for_each_tile);
//                         warpgroup 0's warp 2 stores each tile's dK_j and dV_j, which the
//                         consumers stage in their dQ buffers (head dim 128: dV_j in
//                         buffers of its own, or with _dqt in the dS^T stages;
//                         bwd_dkv_storer).
// Two more kernels of the same cubin run before and after it: _pre (D = rowsum(dO * O), the LSE in
// log2 units, the dQ accumulator (where a first writer stores: the blocks no CTA writes) zeroed and
// the semaphores started (bwd_dq_counter_start); line 1) and _post (dQ scaled and converted, which
// Algorithm 3 leaves out). Where BwdConfig::causal_last_first (d64 causal) the cubin also has _lf:
// this main loop for the causal calls with ordered adds in backward_add_order's last-first order,
// which add a query block's dQ parts the last K/V block's first (kLastFirst).
#pragma once

#include <math.h>
#include <stdint.h>

#include <type_traits>
#include <utility>

#include "kernels/bwd_config.h"
#include "kernels/bwd_params.h"
#include "ptx/barrier.cuh"
#include "ptx/bulk.cuh"
#include "ptx/griddep.cuh"
#include "ptx/math.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/regs.cuh"
#include "ptx/semaphore.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "tile/element.cuh"
#include "tile/fragment.cuh"
#include "tile/gemm.cuh"
#include "tile/pipeline.cuh"
#include "tile/smem_copy.cuh"
#include "tile/smem_tile.cuh"

namespace fa3 {

// Named barrier ids of the backward kernel (0 is __syncthreads).
enum BwdBarrier : uint32_t {
  kBwdBarrierDsAll = 1,   // both warpgroups' dS^T rows are stored (kSharedDs, _kvt: the GEMMs
                          // that follow read both)
  kBwdBarrierDsBase = 2,  // + consumer warpgroup (key split): its dS^T rows are stored
  kBwdBarrierEpilogue = 4,  // the consumers' dK_j and dV_j staging (K_j's and V_j's tiles; _pt
                            // with dV_j in the dS^T stages: both read them)
  kBwdBarrierDsFreeBase = 5,  // + consumer warpgroup (_kvt): the other's reads of the last
                              // step's P^T and dS^T are complete
};

template <class C>
struct BwdTraits {
  static constexpr BwdConfig kCfg = C::value;
  static_assert(bwd_config_is_valid(kCfg), "invalid backward config");
  static constexpr bool kIsBF16 = kCfg.dtype == DType::BF16;
  using Elem = std::conditional_t<kIsBF16, tile::bf16, tile::f16>;
  static constexpr ptx::MmaType kMma = Elem::kMma;
  static constexpr int kHeadDim = kCfg.head_dim;
  static constexpr int kBlockM = kCfg.block_m;
  static constexpr int kBlockN = kCfg.block_n;
  static constexpr int kStages = kCfg.stages;
  static constexpr int kConsumers = kCfg.consumer_warpgroups;
  static constexpr bool kCausal = kCfg.causal;
  static constexpr bool kRotatedWalk = kCfg.rotated_walk;
  static constexpr bool kFirstStore = kCfg.first_store;
  static constexpr bool kPersistent = kCfg.persistent;
  static constexpr DqSplit kDqSplit = kCfg.dq_split;
  static constexpr bool kSharedDs = kCfg.dq_shared_ds();
  static constexpr bool kKvSplitHeadDim = kCfg.kv_split_head_dim();
  static constexpr bool kKvTransposed = kCfg.kv_transposed();
  static constexpr int kKvBoxRows = kCfg.kv_box_rows();
  static constexpr int kQBoxRows = kCfg.q_box_rows();
  static constexpr int kKvCols = kCfg.kv_cols();  // a warpgroup's columns of dK_j and dV_j
  static constexpr int kSCols = kCfg.s_cols();    // its query columns of S^T and dP^T (_kvt:
                                                  // its key columns of S and dP)
  static constexpr int kDsStages = kCfg.ds_stages();
  static constexpr int kDqCols = kCfg.dq_cols();
  static constexpr int kDqRows = kCfg.dq_rows();
  static constexpr int kDqPieceCols = kCfg.dq_piece_cols();
  static constexpr int kDqPieces = kCfg.dq_pieces();
  static constexpr int kDqSlots = kCfg.dq_slots();
  static constexpr bool kDqRing = kCfg.dq_ring();  // _kvt: the pieces share a ring of buffers
  // The <name>_lf entry: causal calls with ordered adds, the last K/V block's dQ adds first
  // (kOrderedLastFirst, BwdWork::add_rank; where and why: BwdConfig::causal_last_first).
  static constexpr bool kLastFirst = kCfg.last_first;
  static constexpr bool kHasLastFirst = kCfg.causal_last_first();  // the cubin has _lf
  static constexpr bool kDqTurnEarly = kCfg.dq_turn_early();
  static constexpr bool kDqPublishNextStep = kCfg.dq_publish_next_step();
  static constexpr bool kSplitQdo = kCfg.split_qdo_barriers();
  static constexpr bool kKDouble = kCfg.k_double_buffered();
  static constexpr bool kKvReleasedApart = kCfg.kv_released_apart();
  static constexpr bool kSplitsLastWave = kCfg.splits_last_wave();
  static constexpr BwdSmemLayout kSmem = BwdSmemLayout::of(kCfg);
  using KVTile = tile::SmemTile<Elem, kBlockN, kHeadDim>;  // K_j or V_j, 64 rows a warpgroup
  // _pt: a warpgroup's 64 keys of dK_j or dV_j, staged in its dQ buffer (two of them).
  using KVRows = tile::SmemTile<Elem, 64, kHeadDim>;
  using QTile = tile::SmemTile<Elem, kBlockM, kHeadDim>;   // Q_i or dO_i
  static constexpr bool kDqTransposed = kCfg.dq_transposed();
  // dS^T: keys x queries; _dqt: dS, queries x keys (the K-major B of dQ_i^T = K_j^T dS^T).
  using DsTile = std::conditional_t<kDqTransposed, tile::SmemTile<Elem, kBlockM, kBlockN>,
                                    tile::SmemTile<Elem, kBlockN, kBlockM>>;
  using DsRows = tile::SmemTile<Elem, 64, kBlockM>;        // a warpgroup's 64 keys of it
  using KSlice = tile::SmemTile<Elem, kBlockN, kCfg.dq_piece_cols()>;  // K_j's of a dQ piece
  using QSlice = tile::SmemTile<Elem, kBlockM, kKvCols>;  // _kvh: Q_i's or dO_i's of dK, dV
  using DqStaging = tile::AccStagingTile<kCfg.dq_piece_cols()>;  // a dQ_i piece, fp32
  using Pipe = tile::TmaPipeline<kStages>;
  static_assert(KVTile::kBytes == kSmem.kv_bytes && QTile::kBytes == kSmem.qdo_stage_bytes &&
                    DsTile::kBytes == kSmem.ds_bytes && DqStaging::kBytes == kSmem.dq_bytes,
                "tiles and the shared-memory plan agree");
  static_assert(kDqSplit != DqSplit::HeadDim || kDqCols % 64 == 0,
                "the head-dim split gives a warpgroup whole K chunks");
  static_assert(kDqRows == 64, "a warpgroup's dQ part is one wgmma M (_dqt: of dQ_i^T)");
  // Bytes of 64 rows of a 128-byte chunk (a warpgroup's 64 keys of K_j or dS^T).
  static constexpr uint32_t kBytesOf64Rows = 64 * 128;
  static constexpr int kAcc = kKvCols / 2;  // a thread's accumulators of dK_j or dV_j
  static constexpr int kSAcc = kSCols / 2;  // of S^T or dP^T (64 keys x its query columns)
  static constexpr int kColGroups = kSCols / 8;  // its query column pairs (L_i, D_i)
  static constexpr int kDqAcc = kDqCols / 2;  // of its dQ_i part
  static constexpr int kProducerRegs = kCfg.producer_regs();
  static constexpr int kConsumerRegs = kCfg.consumer_regs();
  // _pt: where a warpgroup's dV_j rows are staged: after its dK_j rows in its dQ buffer, in a
  // buffer of their own, or (_dqt) in dS^T stage wg.
  static constexpr bool kDvStagedApart = kCfg.dv_staging_bytes() > 0;
  static constexpr bool kDvInDs = kCfg.dv_staged_in_ds();
  static_assert(!kPersistent || ((kDvStagedApart || kDvInDs ? 1 : 2) * KVRows::kBytes <= DqStaging::kBytes &&
                                 kSmem.dq_offset % 1024 == 0 && DqStaging::kBytes % 1024 == 0 &&
                                 kSmem.dv_offset % 1024 == 0),
                "_pt: a warpgroup's dK_j (and dV_j) rows fit its dQ buffer, 1024-byte aligned (swizzle)");
  static_assert(!kDvInDs || (KVRows::kBytes <= DsTile::kBytes && kSmem.ds_offset % 1024 == 0 &&
                             DsTile::kBytes % 1024 == 0),
                "_pt: a warpgroup's dV_j rows fit a dS^T stage, 1024-byte aligned (swizzle)");
};

// Shared-memory addresses of one backward CTA.
template <class Tr>
struct BwdSmem {
  uint32_t k, v, q, dout, stats, ds, p_t, dq, dv_rows_base;
  uint32_t kv_full, dq_full, dq_empty, do_full, do_empty;
  // _pt: K_j and V_j read by the tile's last GEMMs (every consumer thread arrives); the
  // next tile published in slot k % 2 (the producer arrives on full; the dQ writer, the dK/dV
  // storer and every consumer thread on empty once read); a warpgroup's dK_j and dV_j staged
  // (dkv_full, a barrier per warpgroup); the tile slots and the carries of warpgroup 0's roles.
  uint32_t kv_empty, tile_full, tile_empty, dkv_full, tile_slots;
  // _pt with dV_j staged in the dS^T stages: the storer has read them (the next tile's dS^T
  // may be written).
  uint32_t dv_read;
  // kKDouble: K_j in buffer b full (the producer's copy) and read by its tile's GEMMs (every
  // consumer thread); kv_full and kv_empty then tell of V_j alone. kKvReleasedApart: K_j
  // read by its tile's last dQ GEMM (k_empty, one buffer); kv_empty then tells of V_j alone.
  uint32_t k_full, k_empty;
  typename Tr::Pipe pipe;  // Q_i, dO_i, LSE_i, D_i per stage

  __device__ __forceinline__ explicit BwdSmem(uint32_t base) {
    k = base + Tr::kSmem.k_offset;
    v = base + Tr::kSmem.v_offset;
    q = base + Tr::kSmem.q_offset;
    dout = base + Tr::kSmem.do_offset;
    stats = base + Tr::kSmem.stats_offset;
    ds = base + Tr::kSmem.ds_offset;
    p_t = base + Tr::kSmem.p_offset;
    dq = base + Tr::kSmem.dq_offset;
    dv_rows_base = base + Tr::kSmem.dv_offset;
    const uint32_t bars = base + Tr::kSmem.barrier_offset;
    kv_full = bars;
    pipe = {bars + 8, bars + 8 + 8 * Tr::kStages};
    dq_full = bars + 8 + 16 * Tr::kStages;
    dq_empty = dq_full + 8 * Tr::kDqSlots;
    do_full = dq_empty + 8 * Tr::kDqSlots;
    do_empty = do_full + 8 * Tr::kStages;
    kv_empty = dq_empty + 8 * Tr::kDqSlots + (Tr::kSplitQdo ? 16 * Tr::kStages : 0);
    tile_full = kv_empty + 8;
    tile_empty = tile_full + 16;
    dkv_full = tile_empty + 16;
    tile_slots = dkv_full + 8 * Tr::kConsumers;
    dv_read = tile_slots + 32;
    k_full = dv_read + 8;
    // kKvReleasedApart's one k_empty takes k_full's slot, which it leaves unused.
    k_empty = Tr::kKDouble ? k_full + 16 : k_full;
  }
  // Tile k's K_j (k: the tiles before, modulo 4): buffer k % 2 with kKDouble.
  __device__ __forceinline__ uint32_t k_tile(uint32_t tiles) const {
    return Tr::kKDouble ? k + (tiles & 1) * Tr::kSmem.kv_bytes : k;
  }
  __device__ __forceinline__ uint32_t k_full_bar(uint32_t k) const { return k_full + 8 * (k & 1); }
  __device__ __forceinline__ uint32_t k_empty_bar(uint32_t k) const {
    return Tr::kKDouble ? k_empty + 8 * (k & 1) : k_empty;
  }
  __device__ __forceinline__ uint32_t dkv_full_bar(int wg) const { return dkv_full + 8 * wg; }
  // Where a role of warpgroup 0 keeps its BwdCarry during a tile (bwd_for_each_tile).
  __device__ __forceinline__ uint32_t carry_home(int role) const { return tile_slots + 8 + 4 * role; }
  // _pt with ordered adds: the CTA's first tile, drawn by thread 0 (bwd_first_tile).
  __device__ __forceinline__ uint32_t first_tile_home() const { return tile_slots + 24; }
  // kSplitsLastWave: whether the consumers' piece was its split tile's last (1: they store the
  // tile; bwd_sum_split_tile), for them and bwd_dkv_storer.
  __device__ __forceinline__ uint32_t split_last_home() const { return tile_slots + 20; }
  // kSplitsLastWave: the producer's next item where its chunk goes on (bwd_for_each_tile).
  __device__ __forceinline__ uint32_t chained_item_home() const { return tile_slots + 28; }
  __device__ __forceinline__ uint32_t tile_full_bar(uint32_t k) const { return tile_full + 8 * (k & 1); }
  __device__ __forceinline__ uint32_t tile_empty_bar(uint32_t k) const { return tile_empty + 8 * (k & 1); }
  __device__ __forceinline__ uint32_t tile_slot(uint32_t k) const { return tile_slots + 4 * (k & 1); }
  // The barrier dO_i and D_i of stage s land on: their own (kSplitQdo), else the stage's full.
  __device__ __forceinline__ uint32_t do_full_bar(uint32_t s) const {
    return Tr::kSplitQdo ? do_full + 8 * s : pipe.full(s);
  }
  // kSplitQdo: the barrier the consumers release dO_i and D_i of stage s on (Q_i and LSE_i:
  // the stage's empty).
  __device__ __forceinline__ uint32_t do_empty_bar(uint32_t s) const { return do_empty + 8 * s; }
  __device__ __forceinline__ uint32_t q_stage(uint32_t s) const { return q + s * Tr::QTile::kBytes; }
  __device__ __forceinline__ uint32_t do_stage(uint32_t s) const {
    return dout + s * Tr::QTile::kBytes;
  }
  // LSE_i * log2(e), then D_i: block_m floats each.
  __device__ __forceinline__ uint32_t lse_stage(uint32_t s) const {
    return stats + s * Tr::kSmem.stats_stage_bytes;
  }
  __device__ __forceinline__ uint32_t dpsum_stage(uint32_t s) const {
    return lse_stage(s) + Tr::kBlockM * 4;
  }
  __device__ __forceinline__ uint32_t ds_tile(int stage) const {
    return ds + stage * Tr::DsTile::kBytes;
  }
  __device__ __forceinline__ uint32_t p_tile(int stage) const {  // _kvh, _kvt: P^T, as dS^T
    return p_t + stage * Tr::DsTile::kBytes;
  }
  // The dQ staging ring's buffer `slot` (bwd_config.h, dq_pieces), and its full / empty
  // barriers. Where a warpgroup's part is one piece, its slot is its index.
  __device__ __forceinline__ uint32_t dq_part(int slot) const {
    return dq + slot * Tr::DqStaging::kBytes;
  }
  __device__ __forceinline__ uint32_t dq_full_bar(int slot) const { return dq_full + 8 * slot; }
  // _pt: where warpgroup wg stages its 64 keys of dK_j and of dV_j for bwd_dkv_storer.
  __device__ __forceinline__ uint32_t dk_rows(int wg) const { return dq_part(wg); }
  __device__ __forceinline__ uint32_t dv_rows(int wg) const {
    return Tr::kDvInDs          ? ds_tile(wg)
           : Tr::kDvStagedApart ? dv_rows_base + wg * Tr::KVRows::kBytes
                                : dq_part(wg) + Tr::KVRows::kBytes;
  }
  // The ring's entry `entry` (dq_pieces() t + p: piece p of step t): its buffer and the parity
  // of that buffer's use.
  struct DqRingPosition {
    int slot;
    uint32_t phase;
  };
  __device__ static __forceinline__ DqRingPosition dq_ring_position(int entry) {
    return {entry % Tr::kDqSlots, static_cast<uint32_t>((entry / Tr::kDqSlots) & 1)};
  }
  __device__ __forceinline__ uint32_t dq_empty_bar(int slot) const { return dq_empty + 8 * slot; }
};

// The K/V blocks whose CTAs add to query block m_block of a head: all of them, or (causal)
// those whose first query block (BwdWork::m_begin) is at most m_block, a prefix 0, 1, ...:
// block n qualifies when its first key n * block_n is seen by a query below
// (m_block + 1) * block_m, i.e. n * block_n < (m_block + 1) * block_m + seqlen_k - seqlen_q.
// 0 for a causal block none of whose rows sees a key.
template <class Tr>
__device__ __forceinline__ int bwd_adders(const BwdParams& p, int m_block) {
  if (!Tr::kCausal) return p.num_n_blocks;
  const int64_t bound =
      static_cast<int64_t>(m_block + 1) * Tr::kBlockM + p.seqlen_k - p.seqlen_q;
  if (bound <= 0) return 0;
  const int64_t n = (bound + Tr::kBlockN - 1) / Tr::kBlockN;
  return n < p.num_n_blocks ? static_cast<int>(n) : p.num_n_blocks;
}

// One step of a CTA: query block m_block of query head `head`.
struct BwdStep {
  int head, m_block;
};

// The CTA's work: K/V block n_block of (batch, kv_head) (the 1-D grid's order: bwd_tile_at),
// and the query blocks [m_begin, num_m_blocks) of each of the group's query heads that see
// any of its keys. With ordered adds a CTA waits only for the K/V blocks ranked before its own
// at a query block (add_rank), which come earlier in that order.
template <class Tr>
struct BwdWork {
  int n_block, kv_head, batch, m_begin;
  int m_first;  // the query block each head's walk starts at (and wraps around to)
  // kSplitsLastWave: the item (bwd_for_each_tile), and its steps of the tile's walk: all of
  // them, or a piece's (bwd_piece_at) with its tile (counted from split_first); whether the
  // producer's next item is the next piece of its chunk rather than a draw.
  int item = 0, step0 = 0, piece_steps = 0, split_tile = 0;
  bool next_too = false;

  __device__ __forceinline__ BwdWork(const BwdParams& p, int index) : m_begin(0), m_first(0) {
    if constexpr (Tr::kSplitsLastWave) {
      static_assert(!Tr::kCausal, "a split tile's walk: every query block of every head");
      item = index;
      const int tile_steps = p.num_m_blocks * p.heads_per_kv_head;
      piece_steps = tile_steps;
      if (index >= p.split_first) {
        const BwdPiece piece = bwd_piece_at(index - p.split_first, tile_steps, p.split_chunk,
                                            (p.num_tiles - p.split_first) * tile_steps);
        split_tile = piece.tile;
        index = p.split_first + piece.tile;
        step0 = piece.step0;
        piece_steps = piece.steps;
        next_too = piece.next_too;
      }
    }
    const BwdTile tile = bwd_tile_at(index, p.num_n_blocks, p.heads_kv, p.batch * p.heads_kv,
                                     p.l2_section,
                                     Tr::kLastFirst && p.ordered_adds == kOrderedLastFirst);
    n_block = tile.n_block;
    kv_head = tile.kv_head;
    batch = tile.batch;
    if (Tr::kCausal) {
      // Bottom-right aligned: query q sees key j when j <= q + seqlen_k - seqlen_q; the
      // block's first key is seen from query n_block * block_n - (seqlen_k - seqlen_q) on.
      const int first_query = n_block * Tr::kBlockN - p.seqlen_k + p.seqlen_q;
      m_begin = first_query <= 0 ? 0 : first_query / Tr::kBlockM;
      m_first = m_begin;
    } else if (Tr::kRotatedWalk && !p.ordered_adds) {
      // _rw: a pair's K/V blocks run together and would walk the query blocks in step, all
      // their dQ adds into one query block's floats at once; each starts at its own share of
      // the query blocks instead and wraps around. Ordered adds keep the common order: a CTA
      // may wait only for earlier ones.
      if constexpr (Tr::kSplitsLastWave) {
        // Without a division routine (any start is right if every role computes the same): the
        // 64-bit division's and fp32's IEEE slow path spilled in the 24-register roles with
        // the split's decoding. In 32 bits where the product fits, else a fast fp32 quotient.
        const uint64_t product = static_cast<uint64_t>(n_block) * static_cast<uint32_t>(p.num_m_blocks);
        const int m = product <= UINT32_MAX
                          ? static_cast<int>(static_cast<uint32_t>(product) /
                                             static_cast<uint32_t>(p.num_n_blocks))
                          : static_cast<int>(__fdividef(static_cast<float>(product),
                                                        static_cast<float>(p.num_n_blocks)));
        m_first = m < p.num_m_blocks ? m : p.num_m_blocks - 1;
      } else {
        // (Kept apart: the division-free start above, the same below 2^32, changed the d64 and
        // d256 cubins when every _rw kernel took it, and ran 0.975-0.995 of this one at d64 over
        // two readings, d256 level: docs/perf-history.md v92a.)
        m_first = static_cast<int>(static_cast<int64_t>(n_block) * p.num_m_blocks / p.num_n_blocks);
      }
    }
  }
  // The steps in order: head g of the group (outer), query block m (inner), m ascending from
  // m_first, wrapping around to m_begin (m_first is m_begin but in _rw kernels without
  // ordered adds); but descending in causal calls with ordered adds in K/V block order
  // (kOrderedKvBlocks; add_rank). There a query block's adds go in K/V block order, and with
  // ascending m the CTA of K/V block n, whose first query block is about n * block_n /
  // block_m, would wait at each block for the CTAs before it, which reach it later: every CTA
  // would take as long as the longest. Descending, all the CTAs of a head start at the last
  // query block and walk down together, each behind the one before it by the latency of its
  // adds, not by its extra blocks.
  __device__ __forceinline__ int steps(const BwdParams& p) const {
    if constexpr (Tr::kSplitsLastWave) return piece_steps;
    const int per_head = p.num_m_blocks > m_begin ? p.num_m_blocks - m_begin : 0;
    return per_head * p.heads_per_kv_head;
  }
  __device__ __forceinline__ bool descending(const BwdParams& p) const {
    // (The host launches the _lf entry for kOrderedLastFirst only, so there this is false; the
    // compare stays because the _lf entry of the d64 _pt kernels spilled without it, and the
    // main entry keeps its form from before _lf.)
    return Tr::kCausal &&
           (Tr::kLastFirst ? p.ordered_adds == kOrderedKvBlocks : p.ordered_adds != 0);
  }
  // Ordered adds: this K/V block's rank in the order of the adds to a query block, of which
  // the adders are a prefix of the K/V blocks (bwd_adders): K/V block order (kOrderedKvBlocks;
  // non-causal calls always), or (kOrderedLastFirst, causal) the reverse, the last adder
  // first, as the public FA3 orders them. There the CTA of block n + 1 starts at least one
  // query block later than block n's and reaches each common query block at least one step
  // earlier, so with the later blocks started first (bwd_tile_at's shortest_first) the order
  // is the one the adds come in, each a step ahead of the next, where the descending walk
  // queues all of a head's CTAs at each block (and under GQA the later heads by whole steps).
  // The rank is then the block counted from the last K/V block, and the preprocess starts
  // each query block's counter at its first adder's rank (bwd_dq_counter_start), as the dQ
  // writer's 24 registers spilled wherever a step computed its query block's adders.
  __device__ __forceinline__ int32_t add_rank(const BwdParams& p) const {
    return Tr::kLastFirst && p.ordered_adds == kOrderedLastFirst ? p.num_n_blocks - 1 - n_block
                                                                  : n_block;
  }
  // The first step, and each next one by a compare, not a division (the consumers' loop is
  // short enough that an integer division per step showed in its profile).
  __device__ __forceinline__ BwdStep first_step(const BwdParams& p) const {
    if constexpr (Tr::kSplitsLastWave) {
      // A piece starts step0 steps into the walk: head step0 / num_m_blocks of the group, and
      // as many blocks past m_first (m_begin is 0: non-causal).
      const int head = step0 / p.num_m_blocks;
      const int m = m_first + (step0 - head * p.num_m_blocks);
      return {kv_head * p.heads_per_kv_head + head, m < p.num_m_blocks ? m : m - p.num_m_blocks};
    }
    return {kv_head * p.heads_per_kv_head, descending(p) ? p.num_m_blocks - 1 : m_first};
  }
  __device__ __forceinline__ void advance(const BwdParams& p, BwdStep* s) const {
    if (descending(p)) {
      if (--s->m_block < m_begin) s->m_block = p.num_m_blocks - 1, ++s->head;
    } else if (Tr::kRotatedWalk) {
      if (++s->m_block == p.num_m_blocks) s->m_block = 0;
      if (s->m_block == m_first) ++s->head;
    } else {
      if (++s->m_block == p.num_m_blocks) s->m_block = m_begin, ++s->head;
    }
  }
};

// Where a CTA's tile starts in its sequence (_pt; one tile a CTA otherwise, all zero): the
// tiles before it (K_j's and V_j's barrier phases, the tile slots' uses) and their steps (the
// pipeline's stage and phase, the dS^T stage and the dQ buffers' parity), each modulo what it
// decides, in one register (v33e's probe spilled with three carried registers at d64 causal,
// not with one; warpgroup 0's roles keep it in shared memory during a tile).
struct BwdCarry {
  // steps modulo 12 (what 2 x stages for 1-3 stages and 2 dS^T stages see), tiles modulo 4
  // (the tile slots: k % 2 and the parity of k / 2) in bits 8-9, bit 10 once a tile ran.
  uint32_t bits = 0;
  __device__ __forceinline__ uint32_t steps() const { return bits & 0xffu; }
  __device__ __forceinline__ uint32_t tiles() const { return (bits >> 8) & 3u; }
  __device__ __forceinline__ bool first() const { return (bits >> 8) == 0; }  // bit 10: a tile ran
  __device__ __forceinline__ void advance(int tile_steps) {
    bits = 0x400u | (((tiles() + 1) & 3u) << 8) | ((steps() + static_cast<uint32_t>(tile_steps)) % 12u);
  }
  // The dQ buffers' uses before the tile (modulo 2): a step each, and (dK, dV by TMA) one
  // more a tile for its dK_j and dV_j (_pt).
  __device__ __forceinline__ uint32_t dq_uses(const BwdParams& p) const {
    return steps() + (p.dkv_tma ? tiles() : 0u);
  }
};

// A step's loads with kSplitQdo (the stage's empty barrier passed: Q_i and LSE_i are free):
// Q_i and LSE_i on the stage's full barrier first, then, once the consumers released them,
// dO_i and D_i on their own, so that the consumers' S^T GEMM starts while dO_i still loads.
template <class Tr>
__device__ __forceinline__ void bwd_load_step_split(const BwdParams& p, const BwdSmem<Tr>& sm,
                                                    const BwdWork<Tr>& w,
                                                    const tile::PipelineState<Tr::kStages>& st,
                                                    int head, int m_block) {
  constexpr uint32_t kHalfBytes = Tr::QTile::kBytes + Tr::kBlockM * 4;  // Q_i, LSE_i (dO_i, D_i)
  const int64_t row0 =
      (static_cast<int64_t>(w.batch) * p.heads + head) * p.seqlen_q_rounded + m_block * Tr::kBlockM;
  const uint32_t full = sm.pipe.producer_commit(st, kHalfBytes);
  for (int c = 0; c < Tr::QTile::kChunks; ++c)
    for (int r = 0; r < Tr::kBlockM; r += Tr::kQBoxRows)  // the maps' boxes (q_box_rows)
      ptx::tma_load_4d(sm.q_stage(st.index) + c * Tr::QTile::kChunkBytes + r * 128, &p.tma_q, full,
                       c * 64, m_block * Tr::kBlockM + r, head, w.batch);
  ptx::bulk_copy_global_to_shared(sm.lse_stage(st.index), p.lse_log2 + row0, Tr::kBlockM * 4, full);
  tile::mbarrier_wait_idle(sm.do_empty_bar(st.index), st.phase ^ 1);  // as producer_acquire
  const uint32_t do_full = sm.do_full_bar(st.index);
  ptx::mbarrier_arrive_expect_tx(do_full, kHalfBytes);
  for (int c = 0; c < Tr::QTile::kChunks; ++c)
    for (int r = 0; r < Tr::kBlockM; r += Tr::kQBoxRows)
      ptx::tma_load_4d(sm.do_stage(st.index) + c * Tr::QTile::kChunkBytes + r * 128, &p.tma_do,
                       do_full, c * 64, m_block * Tr::kBlockM + r, head, w.batch);
  ptx::bulk_copy_global_to_shared(sm.dpsum_stage(st.index), p.dpsum + row0, Tr::kBlockM * 4, do_full);
}

// Lines 4-12: K_j and V_j once, then Q_i, dO_i, LSE_i and D_i of every step (one thread).
template <class Tr>
__device__ __forceinline__ void bwd_producer(const BwdParams& p, const BwdSmem<Tr>& sm,
                                             const BwdWork<Tr>& w, const BwdCarry& carry) {
  if (carry.first()) {
    ptx::prefetch_tensormap(&p.tma_q);
    ptx::prefetch_tensormap(&p.tma_k);
    ptx::prefetch_tensormap(&p.tma_v);
    ptx::prefetch_tensormap(&p.tma_do);
  }
  // Box (chunk c, rows from r) of K_j's or V_j's tile: the maps' boxes (kv_box_rows).
  const auto load_kv_box = [&](uint32_t dst, const void* map, uint32_t full, int c, int r) {
    ptx::tma_load_4d(dst + c * Tr::KVTile::kChunkBytes + r * 128, map, full, c * 64,
                     w.n_block * Tr::kBlockN + r, w.kv_head, w.batch);
  };
  const auto load_kv = [&](uint32_t dst, const void* map, uint32_t full) {
    for (int c = 0; c < Tr::KVTile::kChunks; ++c)
      for (int r = 0; r < Tr::kBlockN; r += Tr::kKvBoxRows) load_kv_box(dst, map, full, c, r);
  };
  if constexpr (Tr::kKDouble) {
    // K_j into buffer k % 2 once the tile two before (its last user) has ended: while the
    // tile before still runs. V_j once the tile before has read its own.
    const uint32_t k = carry.tiles();
    tile::mbarrier_wait_idle(sm.k_empty_bar(k), ((k >> 1) & 1) ^ 1);
    ptx::mbarrier_arrive_expect_tx(sm.k_full_bar(k), Tr::kSmem.kv_bytes);
    load_kv(sm.k_tile(k), &p.tma_k, sm.k_full_bar(k));
    if (!carry.first()) tile::mbarrier_wait_idle(sm.kv_empty, (k - 1) & 1);
    ptx::mbarrier_arrive_expect_tx(sm.kv_full, Tr::kSmem.kv_bytes);
    load_kv(sm.v, &p.tma_v, sm.kv_full);
  } else if (carry.first()) {  // a CTA's first tile (the one-tile kernels' only one)
    ptx::mbarrier_arrive_expect_tx(sm.kv_full, 2 * Tr::kSmem.kv_bytes);
    for (int c = 0; c < Tr::KVTile::kChunks; ++c)
      for (int r = 0; r < Tr::kBlockN; r += Tr::kKvBoxRows) {
        load_kv_box(sm.k, &p.tma_k, sm.kv_full, c, r);
        load_kv_box(sm.v, &p.tma_v, sm.kv_full, c, r);
      }
  }
  // LSE_i and D_i come from the preprocess, which may still run (programmatic dependent
  // launch); K_j and V_j do not, so their loads go first.
  if (carry.first()) ptx::griddepcontrol_wait();
  tile::PipelineState<Tr::kStages> st = tile::PipelineState<Tr::kStages>::at(carry.steps());
  const int steps = w.steps(p);
  BwdStep at = w.first_step(p);
  // kKvReleasedApart, a CTA's later tiles: V_j once the tile before's last dP^T GEMM has read
  // its own, then K_j once its last dQ GEMM has, then the steps' Q_i and dO_i. (The first Q_i
  // and dO_i before them, whose stage is free by then, spilled 4 bytes at d128 causal; issued
  // apart from K_j and V_j by a thread of their own, they gained nothing: v54a', v54c'.)
  if constexpr (Tr::kKvReleasedApart)
    if (!carry.first()) {
      const uint32_t before = carry.tiles() - 1;
      tile::mbarrier_wait_idle(sm.kv_empty, before & 1);
      ptx::mbarrier_arrive_expect_tx(sm.kv_full, 2 * Tr::kSmem.kv_bytes);
      load_kv(sm.v, &p.tma_v, sm.kv_full);
      tile::mbarrier_wait_idle(sm.k_empty_bar(0), before & 1);
      load_kv(sm.k, &p.tma_k, sm.kv_full);
    }
  for (int t = 0; t < steps; ++t, w.advance(p, &at)) {
    const int head = at.head, m_block = at.m_block;
    sm.pipe.producer_acquire(st);
    if constexpr (Tr::kSplitQdo) {
      bwd_load_step_split<Tr>(p, sm, w, st, head, m_block);
    } else {
      const uint32_t full =
          sm.pipe.producer_commit(st, 2 * Tr::QTile::kBytes + Tr::kSmem.stats_stage_bytes);
      for (int c = 0; c < Tr::QTile::kChunks; ++c)
        for (int r = 0; r < Tr::kBlockM; r += Tr::kQBoxRows) {  // the maps' boxes (q_box_rows)
          const uint32_t box = c * Tr::QTile::kChunkBytes + r * 128;
          const int row = m_block * Tr::kBlockM + r;
          ptx::tma_load_4d(sm.q_stage(st.index) + box, &p.tma_q, full, c * 64, row, head, w.batch);
          ptx::tma_load_4d(sm.do_stage(st.index) + box, &p.tma_do, full, c * 64, row, head, w.batch);
        }
      const int64_t row0 =
          (static_cast<int64_t>(w.batch) * p.heads + head) * p.seqlen_q_rounded + m_block * Tr::kBlockM;
      ptx::bulk_copy_global_to_shared(sm.lse_stage(st.index), p.lse_log2 + row0, Tr::kBlockM * 4, full);
      ptx::bulk_copy_global_to_shared(sm.dpsum_stage(st.index), p.dpsum + row0, Tr::kBlockM * 4, full);
    }
    st.advance();
  }
}

// Floats from a query block's start in the dQ accumulator to step piece `piece` (the ring
// takes every warpgroup's first piece, then every second one; _dqt: warpgroup wg's dQ_i^T
// piece, its 64 head-dim rows x block_m, is the block's wg-th run of 64 block_m floats,
// DqAccumLayout::transposed_float_index).
template <class Tr>
__device__ __forceinline__ int64_t bwd_dq_piece_offset(int piece) {
  constexpr DqAccumLayout kLayout{Tr::kHeadDim};
  const int wg = piece % Tr::kConsumers, c = piece / Tr::kConsumers;
  const int row0 = Tr::kDqSplit == DqSplit::Queries ? Tr::kDqRows * wg : 0;
  const int col0 = Tr::kDqSplit == DqSplit::HeadDim ? Tr::kDqCols * wg + Tr::kDqPieceCols * c : 0;
  return Tr::kDqTransposed ? DqAccumLayout::transposed_part_offset(wg, Tr::kBlockM)
                           : kLayout.part_offset(row0, col0);
}

// Waits until piece `piece` of the writer's step t is staged and returns its buffer: with a
// buffer per piece, piece p's buffer is p and its phase that of the step (dq_fills: the steps
// before the writer's first), both known where the loop unrolls (an A/B of ring counters
// there: -1% at d64 causal 2k-16k); _kvt's ring takes the pieces in order.
template <class Tr>
__device__ __forceinline__ int bwd_dq_wait_piece(const BwdSmem<Tr>& sm, int t, int piece,
                                                 uint32_t dq_fills) {
  const typename BwdSmem<Tr>::DqRingPosition at_ring =
      Tr::kDqRing ? sm.dq_ring_position(Tr::kDqPieces * t + piece)
            : typename BwdSmem<Tr>::DqRingPosition{piece, (dq_fills + t) & 1};
  tile::mbarrier_wait(sm.dq_full_bar(at_ring.slot), at_ring.phase);
  return at_ring.slot;
}

// One dQ piece, staged in buffer `slot`, into the accumulator at `part`: stored (a query
// block's first writer) or added, one bulk operation (one thread).
template <class Tr>
__device__ __forceinline__ void bwd_dq_write_piece(const BwdSmem<Tr>& sm, float* part, int slot,
                                                   bool store, uint64_t policy) {
  if (store)
    ptx::bulk_copy_shared_to_global_hinted(part, sm.dq_part(slot), Tr::DqStaging::kBytes, policy);
  else
    ptx::bulk_reduce_add_f32_hinted(part, sm.dq_part(slot), Tr::DqStaging::kBytes, policy);
  ptx::bulk_commit_group();
}

// The ring (_kvt): after piece `piece`'s bulk operation is issued, the last piece's buffer is
// freed once its own has read it; `slot` becomes the last.
template <class Tr>
__device__ __forceinline__ void bwd_dq_ring_free_last(const BwdSmem<Tr>& sm, int piece, int slot,
                                                      int* last_slot) {
  if (piece > 0) {
    ptx::bulk_wait_group_read<1>();
    ptx::mbarrier_arrive(sm.dq_empty_bar(*last_slot));
  }
  *last_slot = slot;
}

// A buffer per piece (two): each buffer is freed once its own bulk operation has read it, so
// that the first warpgroup need not wait for the second's (its wait for the free buffer was
// 2.5% of the samples).
template <class Tr>
__device__ __forceinline__ void bwd_dq_free_after_reads(const BwdSmem<Tr>& sm) {
  ptx::bulk_wait_group_read<1>();
  ptx::mbarrier_arrive(sm.dq_empty_bar(0));
  ptx::bulk_wait_group_read<0>();
  ptx::mbarrier_arrive(sm.dq_empty_bar(1));
}

// The end of a dQ writer's step. Where other CTAs wait on the query block's counter (ordered
// adds; a first store), the step's bulk operations must be complete in global memory, not only
// have read shared memory, before `increment` is released on it; the buffers are then freed at
// once (freed after their reads instead, the deterministic mode lost 4-5% at d128 from 4k: an
// H100, v27c). Otherwise the ring's last buffer (kDqRing) or each buffer is freed once read.
template <class Tr>
__device__ __forceinline__ void bwd_dq_end_step(const BwdSmem<Tr>& sm, bool publish,
                                                int32_t* counter, int32_t increment,
                                                int last_slot) {
  auto publish_step = [&] {
    ptx::bulk_wait_group<0>();
    ptx::fence_proxy_async_global();
    ptx::red_add_release_gpu(counter, increment);
  };
  if constexpr (Tr::kDqRing) {
    if (publish) publish_step();
    ptx::bulk_wait_group_read<0>();
    ptx::mbarrier_arrive(sm.dq_empty_bar(last_slot));
  } else {
    static_assert(Tr::kDqSlots == 2, "the buffers are freed one by one below");
    if (publish) {
      publish_step();
      ptx::mbarrier_arrive(sm.dq_empty_bar(0));
      ptx::mbarrier_arrive(sm.dq_empty_bar(1));
    } else {
      bwd_dq_free_after_reads<Tr>(sm);
    }
  }
}

// Ordered adds in the _lf entry (kLastFirst): a query block's counter starts at its first
// adder's rank (BwdWork::add_rank) with this bit set, which that adder's publication clears:
// so the writer learns from the counter whether it stores (bwd_dq_counter_start), and no step
// computes its query block's adders.
constexpr int32_t kDqFirstTurn = 1 << 29;

// Line 33: each step's dQ_i pieces (bwd_config.h, dq_pieces: one per consumer warpgroup, or
// _kvt's two each), staged in a ring of shared-memory buffers, added into the workspace's fp32
// accumulator by one bulk reduce-add each (one thread), in ring order, as soon as the piece is
// staged; a buffer is freed once the add that follows it is issued and its own has read it.
// Ordered (BwdParams::ordered_adds: the deterministic mode; small causal calls without _fs): a
// query block's adds wait until the K/V blocks ranked before this one (BwdWork::add_rank) have
// made theirs (a counter per (batch, head, query block) that each CTA raises once its adds
// are complete), the first in the order stores rather than adds, and the pieces go in order,
// so every dQ element is summed in one order. Otherwise every add goes onto the accumulator
// the preprocess zeroed. (_fs kernels store a query block's first parts in the default mode
// too: bwd_dq_writer.)
template <class Tr>
__device__ __forceinline__ void bwd_dq_adder(const BwdParams& p, const BwdSmem<Tr>& sm,
                                              const BwdWork<Tr>& w, const BwdCarry& carry) {
  static_assert(Tr::kDqSlots >= 2, "the ring frees a buffer after the next piece's add is issued");
  // The accumulator's lines stay in L2 for the next K/V blocks' adds.
  const uint64_t policy = ptx::l2_policy_evict_last();
  const int steps = w.steps(p);
  BwdStep at = w.first_step(p);
  // A ring of buffers (_kvt) or a buffer per piece (bwd_dq_wait_piece).
  static_assert(!(Tr::kDqRing && Tr::kPersistent), "_pt: a buffer per piece");
  // The parts come on dq_full a step each (a tile's dK_j and dV_j on dkv_full: bwd_dkv_storer).
  const uint32_t dq_fills = carry.steps();
  // The accumulator zeroed and the counters reset by the preprocess.
  if (carry.first()) ptx::griddepcontrol_wait();
  // Tr::kDqTurnEarly (BwdConfig::dq_turn_early): step t + 1's turn is awaited before step t
  // is published. That cannot deadlock: the CTAs ranked before this one at a query block are
  // ranked before it at every block, so they never wait for it.
  auto await_turn = [&](const BwdStep& s) {
    tile::wait_counter_equals(
        p.dq_semaphore + (static_cast<int64_t>(w.batch) * p.heads + s.head) * p.num_m_blocks +
            s.m_block,
        w.n_block);
  };
  if (Tr::kDqTurnEarly && p.ordered_adds && steps > 0) await_turn(at);
  for (int t = 0; t < steps; ++t, w.advance(p, &at)) {
    const int head = at.head, m_block = at.m_block;
    const int64_t bh = static_cast<int64_t>(w.batch) * p.heads + head;
    float* block = p.dq_accum + (bh * p.seqlen_q_rounded + m_block * Tr::kBlockM) * Tr::kHeadDim;
    int32_t* semaphore = nullptr;
    bool first_turn = false;  // (kLastFirst: the counter's kDqFirstTurn)
    if (p.ordered_adds) {
      semaphore = p.dq_semaphore + bh * p.num_m_blocks + m_block;
      if constexpr (Tr::kDqTurnEarly) {
        static_assert(!Tr::kLastFirst, "early turns: non-causal calls, K/V block order");
      } else if constexpr (Tr::kLastFirst) {
        const int32_t seen = tile::wait_counter_masked(semaphore, ~kDqFirstTurn, w.add_rank(p));
        first_turn = (seen & kDqFirstTurn) != 0;
      } else {
        tile::wait_counter_equals(semaphore, w.n_block);  // K/V block 0 stores
      }
      // No proxy fence between the turn's acquire and this thread's bulk operations, unlike
      // bwd_dq_writer's ticket path: the PTX memory model orders an async-proxy access after a
      // generic acquire only through fence.proxy.async, but here the bulk reduce-add, which
      // is performed in L2, issues only once the acquire has returned the count that the
      // CTA before published after its bulk writes completed and its own proxy fence
      // (bwd_dq_end_step). The public FA3's deterministic dQ adds rely on the same. With the
      // fence (a MEMBAR on each link of the chain), d128 causal's deterministic mode lost
      // 7-8% on an H200, 0.825 of the default at 4k (docs/perf-history.md v87).
    }
    int last_slot = 0;
#pragma unroll
    for (int piece = 0; piece < Tr::kDqPieces; ++piece) {
      const int slot = bwd_dq_wait_piece<Tr>(sm, t, piece, dq_fills);
      // The key split's parts add to the same floats: ordered, the second waits until the
      // first is complete (the order of two bulk operations in flight is not).
      if (!Tr::kSharedDs && piece > 0 && p.ordered_adds) ptx::bulk_wait_group<0>();
      float* part = block + bwd_dq_piece_offset<Tr>(piece);
      // Ordered, the first in the order makes a query block's first adds: it stores its
      // pieces (the key split's second part still adds onto the first), so the preprocess
      // need not zero the accumulator.
      bwd_dq_write_piece<Tr>(sm, part, slot,
                             (Tr::kLastFirst ? first_turn : p.ordered_adds && w.n_block == 0) &&
                                 (Tr::kSharedDs || piece == 0),
                             policy);
      // The ring's buffers come back within the step: the last piece's once its add has read
      // it, after this piece's add is issued.
      if constexpr (Tr::kDqRing) bwd_dq_ring_free_last<Tr>(sm, piece, slot, &last_slot);
    }
    if (Tr::kDqTurnEarly && p.ordered_adds && t + 1 < steps) {
      BwdStep next = at;
      w.advance(p, &next);
      await_turn(next);
    }
    // Ordered: the next K/V block's CTA adds once this one's adds are complete.
    bwd_dq_end_step<Tr>(sm, p.ordered_adds, semaphore, first_turn ? 1 - kDqFirstTurn : 1,
                        last_slot);
  }
  // (The CTA's last bulk operations are awaited before it exits: bwd_kernel.)
}

constexpr int32_t kDqReady = 1 << 30;  // the first store of a query block is complete
// Line 33 in the default mode of _fs kernels (Tr::kFirstStore: causal or _rw, whose walks are
// staggered): the query block's counter is a ticket (the old value's count 0: this CTA reaches
// the block first), the first writer stores its pieces and then raises kDqReady, the others
// add once kDqReady is set, and the preprocess zeroes only the accumulator blocks no CTA
// reaches instead of all of it (134 MB at every size of the paper's grid, for the first adds
// to read back). Where a pair's CTAs walk the query blocks in step they reach each block at
// once and all but one would wait for its store (an H200 A/B: up to -5.5% at d128 and d256
// non-causal), so those kernels, and ordered adds, add as before (bwd_dq_adder).
template <class Tr>
__device__ __forceinline__ void bwd_dq_writer(const BwdParams& p, const BwdSmem<Tr>& sm,
                                              const BwdWork<Tr>& w, const BwdCarry& carry) {
  if (!Tr::kFirstStore || p.ordered_adds) {
    bwd_dq_adder<Tr>(p, sm, w, carry);
    return;
  }
  const uint64_t policy = ptx::l2_policy_evict_last();
  const int steps = w.steps(p);
  BwdStep at = w.first_step(p);
  const uint32_t dq_fills = carry.steps();
  if (carry.first()) ptx::griddepcontrol_wait();  // the counters reset by the preprocess
  for (int t = 0; t < steps; ++t, w.advance(p, &at)) {
    const int head = at.head, m_block = at.m_block;
    const int64_t bh = static_cast<int64_t>(w.batch) * p.heads + head;
    float* block = p.dq_accum + (bh * p.seqlen_q_rounded + m_block * Tr::kBlockM) * Tr::kHeadDim;
    // The counter's index in 32 bits: one register across the pieces, not a pointer's two
    // (with a pointer the d256 causal kernel's dQ writer spilled).
    const uint32_t counter = static_cast<uint32_t>(bh * p.num_m_blocks + m_block);
    int32_t* const semaphore = p.dq_semaphore + counter;
    // The ticket's round trip, and any wait for the first store, overlap this thread's wait
    // for the consumers' first piece, which usually takes longer.
    const int32_t ticket = ptx::atom_add_acquire_gpu(semaphore, 1);
    const bool first = (ticket & (kDqReady - 1)) == 0;
    if (!first) {
      // Add once the first store is complete (the fence orders what the acquire saw before
      // this thread's bulk operations).
      if ((ticket & kDqReady) == 0) tile::wait_counter_bits(semaphore, kDqReady);
      ptx::fence_proxy_async_global();
    }
    int last_slot = 0;
#pragma unroll
    for (int piece = 0; piece < Tr::kDqPieces; ++piece) {
      const int slot = bwd_dq_wait_piece<Tr>(sm, t, piece, dq_fills);
      // The key split's second part adds onto the first's store once that is complete.
      if (!Tr::kSharedDs && piece > 0 && first) ptx::bulk_wait_group<0>();
      float* part = block + bwd_dq_piece_offset<Tr>(piece);
      bwd_dq_write_piece<Tr>(sm, part, slot, first && (Tr::kSharedDs || piece == 0), policy);
      if constexpr (Tr::kDqRing) bwd_dq_ring_free_last<Tr>(sm, piece, slot, &last_slot);
    }
    // The first store complete in global memory before any other CTA adds (the tickets never
    // reach kDqReady).
    bwd_dq_end_step<Tr>(sm, first, p.dq_semaphore + counter, kDqReady, last_slot);
  }
}

// _pt, warp 2 of the producer warpgroup (one thread): each tile's dK_j and dV_j, which each
// consumer warpgroup stages in its dQ buffer (its 64 keys, KVRows; dV_j's in a buffer of its
// own or a dS^T stage where they do not fit, BwdSmem::dv_rows), stored by TMA while the next
// tile runs; each dQ buffer is given back to the consumers (its dq_empty, as the dQ writer does
// after a step) once the stores have read it and the dV_j buffer with it (the consumers' wait
// for the dQ buffer before they stage the next tile's rows covers both), the dS^T stages by
// dv_read. A warp of its own: in the dQ writer's, the 24-register warpgroup spilled.
template <class Tr>
__device__ __forceinline__ void bwd_dkv_storer(const BwdParams& p, const BwdSmem<Tr>& sm,
                                               const BwdWork<Tr>& w, const BwdCarry& carry) {
  if (!p.dkv_tma) return;  // the consumers store from registers
  if (carry.first()) {
    ptx::prefetch_tensormap(&p.tma_dk);
    ptx::prefetch_tensormap(&p.tma_dv);
  }
  for (int wg = 0; wg < Tr::kConsumers; ++wg) {
    tile::mbarrier_wait_idle(sm.dkv_full_bar(wg), carry.tiles() & 1);
    // kSplitsLastWave: a split tile's rows are staged by its last piece only (the flag is
    // rewritten at the consumers' next tile's end, after this storer frees their dQ buffers).
    if constexpr (Tr::kSplitsLastWave)
      if (w.item >= p.split_first && ptx::ld_shared_u32(sm.split_last_home()) == 0) {
        ptx::bulk_commit_group();
        continue;
      }
    const int row = w.n_block * Tr::kBlockN + 64 * wg;
    for (int chunk = 0; chunk < Tr::KVRows::kChunks; ++chunk) {
      const uint32_t at = chunk * Tr::KVRows::kChunkBytes;
      ptx::tma_store_4d(&p.tma_dk, sm.dk_rows(wg) + at, chunk * 64, row, w.kv_head, w.batch);
      ptx::tma_store_4d(&p.tma_dv, sm.dv_rows(wg) + at, chunk * 64, row, w.kv_head, w.batch);
    }
    ptx::bulk_commit_group();
  }
  ptx::bulk_wait_group_read<0>();
  for (int wg = 0; wg < Tr::kConsumers; ++wg) ptx::mbarrier_arrive(sm.dq_empty_bar(wg));
  if constexpr (Tr::kDvInDs) ptx::mbarrier_arrive(sm.dv_read);
}

// A thread's L_i or D_i values (pairs of query columns, 8 columns = 32 bytes apart from
// addr): one 8-byte load per pair, the offsets in the loads.
template <int... G>
__device__ __forceinline__ void load_column_pairs(float2 (&v)[sizeof...(G)], uint32_t addr,
                                                  std::integer_sequence<int, G...>) {
  ((v[G] = ptx::ld_shared_v2_f32<32 * G>(addr)), ...);
}

// Calls f(e, h, value) for each of a thread's S^T (or dP^T) accumulators e = 4 g + 2 h + j
// (row half h) with its query column's value of L_i or D_i: the pairs of columns 8 g + j
// are stat[g] (load_column_pairs).
template <int kColGroups, class F>
__device__ __forceinline__ void for_each_column_value(const float2 (&stat)[kColGroups], F&& f) {
#pragma unroll
  for (int g = 0; g < kColGroups; ++g)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2; ++j) f(4 * g + 2 * h + j, h, j == 0 ? stat[g].x : stat[g].y);
}

// Which elements of S^T a step masks: whole rows (keys past seqlen_k: first_seen[h] is
// INT32_MAX there, INT32_MIN elsewhere), or causal (col_offset(e) < first_seen[h]).
enum class BwdMask { Keys, Causal };

// Line 24 on a thread's S^T accumulators: P^T = exp2(scale_log2 S^T - L) with L = stat[g]
// (pairs of query columns); a masked element's S^T is -inf first, so that one unpredicated
// FFMA and EX2 serve every element.
template <class Tr, BwdMask Mask>
__device__ __forceinline__ void bwd_probabilities(float (&s)[Tr::kSAcc],
                                                  const float2 (&stat)[Tr::kColGroups],
                                                  const int (&first_seen)[2], float scale_log2) {
  for_each_column_value(stat, [&](int e, int h, float l) {
    const bool masked = Mask == BwdMask::Keys ? first_seen[h] > 0
                                              : tile::AccLayout::col_offset(e) < first_seen[h];
    s[e] = ptx::ex2_approx(fmaf(masked ? -INFINITY : s[e], scale_log2, -l));
  });
}

// The tile's end, by one thread (Algorithm 3 leaves it out): dK_j and dV_j, staged in K_j's and
// V_j's tiles, stored by TMA (whole 128-byte lines; the rows past seqlen_k are clipped by the
// tensor maps).
template <class Tr>
__device__ __forceinline__ void bwd_store_dkv_tma(const BwdParams& p, const BwdSmem<Tr>& sm,
                                                  const BwdWork<Tr>& w) {
  for (int c = 0; c < Tr::KVTile::kChunks; ++c)
    for (int r = 0; r < Tr::kBlockN; r += Tr::kKvBoxRows) {  // the maps' boxes (kv_box_rows)
      const uint32_t at = c * Tr::KVTile::kChunkBytes + r * 128;
      const int row = w.n_block * Tr::kBlockN + r;
      ptx::tma_store_4d(&p.tma_dk, sm.k + at, c * 64, row, w.kv_head, w.batch);
      ptx::tma_store_4d(&p.tma_dv, sm.v + at, c * 64, row, w.kv_head, w.batch);
    }
  ptx::bulk_commit_group();
  ptx::bulk_wait_group_read<0>();  // shared memory outlives the stores' reads
}

// Line 28's notice to the dQ writer (lines 32-33): the dQ part a warpgroup stored in buffer `slot`
// (generic-proxy stores) made visible to the dQ writer's bulk operations (async proxy), the buffer
// marked full. Every thread of the warpgroup calls it: dq_full counts 128 arrivals, each after
// the thread's own fence.
template <class Tr>
__device__ __forceinline__ void warpgroup_publish_dq_part(const BwdSmem<Tr>& sm, int slot) {
  ptx::fence_proxy_async_shared();
  ptx::mbarrier_arrive(sm.dq_full_bar(slot));
}

// kSplitsLastWave, a piece of a split tile (bwd_piece_at), by every consumer thread at the
// piece's end (dK_j scaled): its partial dK_j and dV_j to its slot of the workspace (fragment
// order: tile::warpgroup_store_acc_global), then one count on the tile's counter. The piece
// that counts last adds the other pieces' partials into its registers and returns true: it
// stores the tile. No piece waits for another (a piece may be drawn only once a CTA is free; a
// wait could hang where other grids hold the SMs: v82-v85).
// Thread 0's add releases every consumer thread's stores, which the barrier before it orders
// first, and acquires the other pieces' (the pattern of CUTLASS's semaphores); the barrier
// after it orders every thread's reads after the acquire.
template <class Tr>
__device__ __forceinline__ bool bwd_sum_split_tile(const BwdParams& p, const BwdSmem<Tr>& sm,
                                                   const BwdWork<Tr>& w, float (&dk)[Tr::kAcc],
                                                   float (&dv)[Tr::kAcc], int wg, int t_wg) {
  const int chunk = (w.item - p.split_first) / 2;
  const BwdSplitParts parts =
      bwd_split_parts(w.split_tile, p.num_m_blocks * p.heads_per_kv_head, p.split_chunk);
  // A slot: dK_j's then dV_j's 128 keys (each warpgroup's 64 in turn) x head_dim floats.
  constexpr int64_t kWarpgroupFloats = 128 * Tr::kAcc, kFloats = Tr::kConsumers * kWarpgroupFloats;
  const auto slot = [&](int c) {
    return p.dkv_partial + static_cast<int64_t>(c + w.split_tile) * 2 * kFloats +
           wg * kWarpgroupFloats;
  };
  tile::warpgroup_store_acc_global(slot(chunk), dk, t_wg);
  tile::warpgroup_store_acc_global(slot(chunk) + kFloats, dv, t_wg);
  ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
  if (wg == 0 && t_wg == 0) {
    const int32_t before = ptx::atom_add_acq_rel_gpu(p.split_counters + w.split_tile, 1);
    ptx::st_shared_u32(sm.split_last_home(),
                       before == parts.last_chunk - parts.first_chunk ? 1u : 0u);
  }
  ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
  if (ptx::ld_shared_u32(sm.split_last_home()) == 0) return false;
  for (int c = parts.first_chunk; c <= parts.last_chunk; ++c) {
    if (c == chunk) continue;
    tile::warpgroup_add_acc_global(slot(c), dk, t_wg);
    tile::warpgroup_add_acc_global(slot(c) + kFloats, dv, t_wg);
  }
  return true;
}

// Lines 14-29 and the tile's end for consumer warpgroup wg: keys [n_block * block_n + 64 wg, + 64)
// and all the head dim; or (_kvh) all block_n keys, queries [32 wg, + 32) of S^T and dP^T, and
// head-dim columns [head_dim / 2 wg, + head_dim / 2) of dK, dV and dQ. The GEMMs of a step are
// issued so that the stores overlap them: the dS^T store with dV's GEMM (RS), the dQ part's with
// dK's; and L_i, D_i are loaded while the GEMMs that they follow run.
template <class Tr>
__device__ __forceinline__ void bwd_consumer(const BwdParams& p, const BwdSmem<Tr>& sm,
                                             const BwdWork<Tr>& w, const BwdCarry& carry, int wg) {
  static_assert(Tr::kDqPieces == Tr::kConsumers && Tr::kDqSlots == Tr::kConsumers,
                "a warpgroup's dQ part is one piece, staged in buffer wg");
  const int t_wg = static_cast<int>(threadIdx.x % 128);
  const int key0 = w.n_block * Tr::kBlockN + (Tr::kKvSplitHeadDim ? 0 : 64 * wg);
  const int s_col0 = Tr::kKvSplitHeadDim ? Tr::kSCols * wg : 0;   // its queries of S^T
  const int kv_col0 = Tr::kKvSplitHeadDim ? Tr::kKvCols * wg : 0;  // its columns of dK, dV
  // This warpgroup's part of dQ_i: its columns (head-dim split) or rows (query split) of the
  // dQ_i that both compute from the shared dS^T, or all of it over its own keys (key split).
  const int dq_row0 = Tr::kDqSplit == DqSplit::Queries ? Tr::kDqRows * wg : 0;
  float dk[Tr::kAcc], dv[Tr::kAcc];
  tile::fill(dk, 0.0f);
  tile::fill(dv, 0.0f);
  if constexpr (Tr::kKDouble)
    tile::mbarrier_wait(sm.k_full_bar(carry.tiles()), (carry.tiles() >> 1) & 1);
  tile::mbarrier_wait(sm.kv_full, carry.tiles() & 1);
  const uint32_t k_tile = sm.k_tile(carry.tiles());  // K_j
  // _pt, dV_j staged in the dS^T stages: the last tile's, read by the storer before this
  // tile's first dS^T store (by then long since: its TMA stores read them as the tile ended).
  if constexpr (Tr::kDvInDs)
    if (!carry.first() && p.dkv_tma) tile::mbarrier_wait(sm.dv_read, (carry.tiles() - 1) & 1);
  tile::PipelineState<Tr::kStages> st = tile::PipelineState<Tr::kStages>::at(carry.steps());
  const uint32_t dq_uses = carry.dq_uses(p);
  const int steps = w.steps(p);
  BwdStep at = w.first_step(p);
  for (int t = 0; t < steps; ++t, w.advance(p, &at)) {
    const int m_block = at.m_block;
    sm.pipe.consumer_wait(st);  // lines 19-20: Q_i, L_i (and 22: dO_i, D_i, unless kSplitQdo)
    // The thread's query columns are col0 + AccLayout::col_offset(e): for e = 4 g + 2 h + j
    // (row half h), col0 + 8 g + j, so L_i and D_i come in pairs, one 8-byte load per group
    // g. L_i is loaded before the GEMMs are issued: loaded after them, its loads queued
    // behind the GEMMs' shared-memory reads, and the softmax's first FFMA waited for them
    // (4.7% of the samples at d128 causal 8k).
    using ColGroups = std::make_integer_sequence<int, Tr::kColGroups>;
    const int col0 = s_col0 + tile::AccLayout::col(t_wg, 0);
    float2 stat[Tr::kColGroups];
    load_column_pairs(stat, sm.lse_stage(st.index) + 4 * col0, ColGroups{});
    // Lines 21 and 23, transposed: S^T = K_j Q_i^T and dP^T = V_j dO_i^T (keys as M).
    float s[Tr::kSAcc], dp[Tr::kSAcc];
    const int a_row0 = Tr::kKvSplitHeadDim ? 0 : 64 * wg;
    tile::warpgroup_gemm_ss_abt<Tr::kMma, Tr::kSCols, typename Tr::KVTile, typename Tr::QTile>(
        s, k_tile, a_row0, sm.q_stage(st.index) + s_col0 * 128);
    if constexpr (Tr::kSplitQdo) tile::mbarrier_wait(sm.do_full_bar(st.index), st.phase);
    tile::warpgroup_gemm_ss_abt<Tr::kMma, Tr::kSCols, typename Tr::KVTile, typename Tr::QTile>(
        dp, sm.v, a_row0, sm.do_stage(st.index) + s_col0 * 128);
    // The last step's dQ part, staged at its end (BwdConfig::dq_publish_next_step).
    if constexpr (Tr::kDqPublishNextStep)
      if (t > 0) warpgroup_publish_dq_part(sm, wg);
    // Line 24: P^T = exp(scale S^T - L), 0 where the key is masked (causal, past seqlen_k).
    // Rows past seqlen_q and rows that saw no key have L = +inf (the preprocess), so P = 0.
    // Per row half h of the thread: the first column offset its key sees (key > query +
    // seqlen_k - seqlen_q <=> col_offset(e) < first_seen[h]; all masked past seqlen_k).
    int first_seen[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = key0 + tile::AccLayout::row(t_wg, 2 * h);
      first_seen[h] = key >= p.seqlen_k ? INT32_MAX
                      : Tr::kCausal
                          ? key - (m_block * Tr::kBlockM + col0) - (p.seqlen_k - p.seqlen_q)
                          : INT32_MIN;
    }
    ptx::wgmma_wait_group<1>();
    tile::pin_registers(s);
    // No branch around the unmasked blocks: one cost 3.5% geomean and 9% at d64 causal (v26g'),
    // and 4-10% at d64 causal 2k-16k on later kernels (v41d'): ptxas' schedule around it.
    bwd_probabilities<Tr, Tr::kCausal ? BwdMask::Causal : BwdMask::Keys>(s, stat, first_seen,
                                                                          p.scale_log2);
    // D_i, while dP^T's GEMM completes.
    load_column_pairs(stat, sm.dpsum_stage(st.index) + 4 * col0, ColGroups{});
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(dp);
    // _pt (kKDouble, kKvReleasedApart): the tile's last dP^T GEMM has read V_j; the next
    // tile's may load.
    if constexpr (Tr::kKDouble || Tr::kKvReleasedApart)
      if (t == steps - 1) ptx::mbarrier_arrive(sm.kv_empty);
    // Line 25: dS^T = P^T (dP^T - D_i), in place of dP^T.
    for_each_column_value(stat, [&](int e, int, float d) { dp[e] = s[e] * (dp[e] - d); });
    // Packed for the RS GEMMs (or the stores of _kvh): P^T in 32-bit registers and in 16-bit
    // pairs at once would not fit with block_m 128.
    uint32_t p_frag[Tr::kSCols / 16][4], ds_frag[Tr::kSCols / 16][4];
    tile::acc_to_a_operands<Tr::kIsBF16, Tr::kSCols>(s, p_frag);
    tile::acc_to_a_operands<Tr::kIsBF16, Tr::kSCols>(dp, ds_frag);
    // Line 28's operand (dS to shared memory): the warpgroup's 64 rows of dS^T (_kvh: its 32
    // columns, and P^T's too), stored before dV's GEMM is issued so that the stores complete while
    // it issues, not at the fence. Their last reader was the dQ GEMM (and _kvh, dV's and dK's) of
    // step t - ds_stages: with the key split this warpgroup's own, complete at its wait; with the
    // others also the other warpgroup's, complete before it joined the barrier of step t - 1.
    const int ds_stage = Tr::kDsStages == 1 ? 0 : (carry.steps() + t) % Tr::kDsStages;
    const uint32_t ds = sm.ds_tile(ds_stage);
    if constexpr (Tr::kDqTransposed)  // dS: the warpgroup's 64 keys are its columns
      tile::warpgroup_store_packed_transposed<typename Tr::DsTile, Tr::kSCols>(ds_frag, ds, 0, 64 * wg,
                                                                               t_wg);
    else
      tile::warpgroup_store_packed<typename Tr::DsTile, Tr::kSCols>(ds_frag, ds, a_row0, s_col0, t_wg);
    if constexpr (Tr::kKvSplitHeadDim)
      tile::warpgroup_store_packed<typename Tr::DsTile, Tr::kSCols>(p_frag, sm.p_tile(ds_stage), 0,
                                                                    s_col0, t_wg);
    else  // Line 26: dV_j += P^T dO_i (A from registers).
      tile::warpgroup_gemm_rs_ab<Tr::kMma, Tr::kHeadDim, typename Tr::QTile>(dv, p_frag, sm.do_stage(st.index));
    ptx::fence_proxy_async_shared();  // generic-proxy stores -> wgmma (async proxy) reads
    if (Tr::kSharedDs)
      ptx::named_barrier_sync(kBwdBarrierDsAll, 128 * Tr::kConsumers);
    else
      ptx::named_barrier_sync(kBwdBarrierDsBase + wg, 128);
    if constexpr (Tr::kKvSplitHeadDim) {
      // _kvh: lines 27 and 26 first, dK_j += dS^T Q_i and dV_j += P^T dO_i with both
      // warpgroups' dS^T and P^T from shared memory: they are the last readers of Q_i and
      // dO_i (one stage), each released as soon as its GEMM completes, dK's first: the next
      // step's first GEMM needs Q_i, which then loads while dV's and dQ's GEMMs run.
      const uint32_t slice = (kv_col0 / 64) * Tr::QTile::kChunkBytes;
      float dq[Tr::kDqAcc];
      static_assert(Tr::kSplitQdo, "_kvh tiles leave room for one stage: Q_i, dO_i apart");
      static_assert(!Tr::kDqPublishNextStep, "_kvh publishes its dQ part in its own step");
      static_assert(!Tr::kPersistent, "_kvh is written for one tile a CTA (K_j, V_j never released)");
      tile::warpgroup_gemm_ss_ab<Tr::kMma, Tr::kKvCols, typename Tr::DsTile, typename Tr::QSlice>(
          dk, ds, 0, sm.q_stage(st.index) + slice, tile::Accumulate::Yes);
      tile::warpgroup_gemm_ss_ab<Tr::kMma, Tr::kKvCols, typename Tr::DsTile, typename Tr::QSlice>(
          dv, sm.p_tile(ds_stage), 0, sm.do_stage(st.index) + slice, tile::Accumulate::Yes);
      // Line 28: its 128 columns of dQ_i = dS K_j.
      tile::warpgroup_gemm_ss_atb<Tr::kMma, Tr::kDqCols, typename Tr::DsTile, typename Tr::KSlice>(
          dq, ds, 0, sm.k + (Tr::kDqCols / 64) * wg * Tr::KVTile::kChunkBytes, tile::Accumulate::No);
      ptx::wgmma_wait_group<2>();  // dK
      tile::pin_registers(dk);
      // Every thread arrives after its own reads of L_i (and below, of D_i).
      sm.pipe.consumer_release(st);
      ptx::wgmma_wait_group<1>();  // dV
      tile::pin_registers(dv);
      ptx::mbarrier_arrive(sm.do_empty_bar(st.index));
      ptx::wgmma_wait_group<0>();
      tile::pin_registers(dq);
      tile::mbarrier_wait(sm.dq_empty_bar(wg), ((dq_uses + t) & 1) ^ 1);
      Tr::DqStaging::warpgroup_store(dq, sm.dq_part(wg), t_wg);
      warpgroup_publish_dq_part(sm, wg);
    } else {
      // Line 28: this warpgroup's part of dQ_i = dS K_j: all of dQ_i over its 64 keys (key
      // split), its 64 columns (head-dim split) or 64 rows (query split) over all the keys.
      // (One wgmma M block: warpgroup_gemm_ss_atbt's accumulators are per M block.)
      float dq_blocks[1][Tr::kDqAcc];
      float (&dq)[Tr::kDqAcc] = dq_blocks[0];
      if constexpr (Tr::kDqTransposed)  // dQ_i^T: its 64 head-dim rows x all block_m queries
        tile::warpgroup_gemm_ss_atbt<Tr::kMma, Tr::kBlockM, typename Tr::KVTile, typename Tr::DsTile, 1>(
            dq_blocks, sm.k, 64 * wg, ds, tile::Accumulate::No);
      else if constexpr (Tr::kDqSplit == DqSplit::HeadDim)
        tile::warpgroup_gemm_ss_atb<Tr::kMma, Tr::kDqCols, typename Tr::DsTile, typename Tr::KSlice>(
            dq, ds, 0, sm.k + (Tr::kDqCols / 64) * wg * Tr::KVTile::kChunkBytes, tile::Accumulate::No);
      else if constexpr (Tr::kDqSplit == DqSplit::Queries)
        tile::warpgroup_gemm_ss_atb<Tr::kMma, Tr::kHeadDim, typename Tr::DsTile, typename Tr::KVTile>(
            dq, ds, dq_row0, k_tile, tile::Accumulate::No);
      else
        tile::warpgroup_gemm_ss_atb<Tr::kMma, Tr::kHeadDim, typename Tr::DsRows, typename Tr::KVTile, 64>(
            dq, ds + wg * Tr::kBytesOf64Rows, 0, sm.k + wg * Tr::kBytesOf64Rows,
            tile::Accumulate::No);
      // Line 27: dK_j += dS^T Q_i.
      tile::warpgroup_gemm_rs_ab<Tr::kMma, Tr::kHeadDim, typename Tr::QTile>(dk, ds_frag, sm.q_stage(st.index));
      ptx::wgmma_wait_group<1>();  // dV and dQ
      tile::pin_registers(dv);
      tile::pin_registers(dq);
      // kKvReleasedApart: the tile's last dQ GEMM has read K_j; the next tile's may load.
      if constexpr (Tr::kKvReleasedApart)
        if (t == steps - 1) ptx::mbarrier_arrive(sm.k_empty_bar(0));
      // Line 28: the part to shared memory (fragment order: 16-byte stores, no bank
      // conflicts) for the dQ writer once it has read the last, while dK's GEMM runs.
      tile::mbarrier_wait(sm.dq_empty_bar(wg), ((dq_uses + t) & 1) ^ 1);
      Tr::DqStaging::warpgroup_store(dq, sm.dq_part(wg), t_wg);
      // (kDqPublishNextStep: the tile's last part at once, so that the dQ writer has taken it
      // by the tile's end, where the warpgroup stages dK_j in this buffer.)
      if (!Tr::kDqPublishNextStep || t == steps - 1) warpgroup_publish_dq_part(sm, wg);
      ptx::wgmma_wait_group<0>();
      tile::pin_registers(dk);
      // Q_i and dO_i (and L_i, D_i) have been read by every GEMM and the softmax of the step.
      // Every thread arrives after its own reads of L_i and D_i: a lane-0 arrival would not
      // order the other lanes' reads before the producer's next copy into the stage
      // (racecheck reported them).
      sm.pipe.consumer_release(st);
    }
    st.advance();
  }
  // _pt: the last step's GEMMs have read K_j and V_j; the next tile's may load (kKDouble:
  // K_j's buffer; V_j, and kKvReleasedApart's K_j, were released in the loop, here only for
  // a tile of no steps).
  if constexpr (Tr::kKDouble) {
    ptx::mbarrier_arrive(sm.k_empty_bar(carry.tiles()));
    if (steps == 0) ptx::mbarrier_arrive(sm.kv_empty);
  } else if constexpr (Tr::kKvReleasedApart) {
    if (steps == 0) {
      ptx::mbarrier_arrive(sm.kv_empty);
      ptx::mbarrier_arrive(sm.k_empty_bar(0));
    }
  }
  // The tile's end (Algorithm 3 leaves it out): dK_j (scaled) and dV_j to global memory, rows past
  // seqlen_k dropped. Keys no query sees (causal) get zeros.
#pragma unroll
  for (int e = 0; e < Tr::kAcc; ++e) dk[e] *= p.scale;
  // kSplitsLastWave: a split tile is stored by its last piece, with the others' sums.
  bool store = true;
  if constexpr (Tr::kSplitsLastWave)
    if (w.item >= p.split_first) store = bwd_sum_split_tile<Tr>(p, sm, w, dk, dv, wg, t_wg);
  if (Tr::kPersistent && p.dkv_tma) {
    // The warpgroup's rows, staged in its dQ buffer (the tile's last use of it; dV_j's in its
    // own buffer where they do not fit, freed with the dQ buffer) for bwd_dkv_storer's TMA
    // stores. (A piece that does not store keeps the barriers' turns.)
    tile::mbarrier_wait(sm.dq_empty_bar(wg), ((dq_uses + steps) & 1) ^ 1);
    // dS^T stage wg: the other warpgroup's last dQ GEMMs read it too.
    if constexpr (Tr::kDvInDs) ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
    if (store) {
      tile::warpgroup_store_acc<typename Tr::KVRows, Tr::kKvCols>(dk, sm.dk_rows(wg), 0, 0, t_wg);
      tile::warpgroup_store_acc<typename Tr::KVRows, Tr::kKvCols>(dv, sm.dv_rows(wg), 0, 0, t_wg);
      ptx::fence_proxy_async_shared();  // generic-proxy stores -> the TMA's (async proxy) reads
    }
    ptx::mbarrier_arrive(sm.dkv_full_bar(wg));
    return;
  }
  if (!store) return;
  if (p.dkv_tma) {
    // Through shared memory: staged in K_j's and V_j's tiles (the TMA layout they were loaded
    // in), once no GEMM of either warpgroup reads them, then stored by TMA.
    ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
    const int row0 = Tr::kKvSplitHeadDim ? 0 : 64 * wg;
    tile::warpgroup_store_acc<typename Tr::KVTile, Tr::kKvCols>(dk, sm.k, row0, kv_col0, t_wg);
    tile::warpgroup_store_acc<typename Tr::KVTile, Tr::kKvCols>(dv, sm.v, row0, kv_col0, t_wg);
    ptx::fence_proxy_async_shared();  // generic-proxy stores -> the TMA's (async proxy) reads
    ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
    if (wg == 0 && t_wg == 0) bwd_store_dkv_tma<Tr>(p, sm, w);
    return;
  }
  // The caller's dK or dV is not TMA-aligned (bwd_params.h): 4-byte pairs from registers.
#pragma unroll
  for (int e = 0; e < Tr::kAcc; e += 2) {
    const int key = key0 + tile::AccLayout::row(t_wg, e);
    if (key >= p.seqlen_k) continue;
    const int col = kv_col0 + tile::AccLayout::col(t_wg, e);
    const int64_t k_at = w.batch * p.dk_stride[0] + key * p.dk_stride[1] +
                         w.kv_head * p.dk_stride[2] + col;
    const int64_t v_at = w.batch * p.dv_stride[0] + key * p.dv_stride[1] +
                         w.kv_head * p.dv_stride[2] + col;
    const uint32_t k_pair = Tr::kIsBF16 ? ptx::pack_bf16x2(dk[e], dk[e + 1])
                                        : ptx::pack_f16x2(dk[e], dk[e + 1]);
    const uint32_t v_pair = Tr::kIsBF16 ? ptx::pack_bf16x2(dv[e], dv[e + 1])
                                        : ptx::pack_f16x2(dv[e], dv[e + 1]);
    *reinterpret_cast<uint32_t*>(p.dk + k_at) = k_pair;
    *reinterpret_cast<uint32_t*>(p.dv + v_at) = v_pair;
  }
}

// Lines 14-29 and the tile's end for consumer warpgroup wg of a _kvt kernel (head dim 256, 80 keys,
// as the public FA3): S = Q_i K_j^T and dP = dO_i V_j^T not transposed, for the 64 queries (M) and
// the warpgroup's block_n / 2 keys [40 wg, + 40) (N); P^T and dS^T of both warpgroups' keys through
// shared memory; dK_j^T += Q_i^T dS and dV_j^T += dO_i^T P for its 128 head-dim columns (M: two
// wgmma M blocks) and all block_n keys (N), so that block_n need not be a multiple of 64 (each Q_i,
// dO_i load and dQ_i add serves 80 keys, not 64); dQ_i = dS K_j for its 128 columns in two
// 64-column pieces, staged through the dQ ring (bwd_dq_writer).
template <class Tr>
__device__ __forceinline__ void bwd_consumer_transposed(const BwdParams& p, const BwdSmem<Tr>& sm,
                                                        const BwdWork<Tr>& w, int wg) {
  constexpr int kKeys = Tr::kSCols;           // the warpgroup's keys of S and dP
  constexpr int kMBlocks = Tr::kKvCols / 64;  // wgmma M blocks of its dK^T and dV^T
  constexpr int kPiecesPerWg = Tr::kDqCols / Tr::kDqPieceCols;
  static_assert(Tr::kSplitQdo && Tr::kDsStages == 1 && Tr::kDqSplit == DqSplit::HeadDim &&
                    Tr::kDqPieceCols == 64 && Tr::kBlockM == 64,
                "_kvt: one stage, one P^T / dS^T tile, dQ by head dim in 64-column pieces");
  const int t_wg = static_cast<int>(threadIdx.x % 128);
  const int key_row0 = kKeys * wg;           // its keys' first row of K_j, V_j, P^T, dS^T
  const int kv_col0 = Tr::kKvCols * wg;      // its head-dim columns of dK, dV and dQ
  const int row = tile::AccLayout::row(t_wg, 0);  // its query rows of S: row, row + 8
  // Its first key of S, from which AccLayout::col_offset(e) counts.
  const int first_key = w.n_block * Tr::kBlockN + key_row0 + tile::AccLayout::col(t_wg, 0);
  float dk[kMBlocks][Tr::kBlockN / 2], dv[kMBlocks][Tr::kBlockN / 2];
#pragma unroll
  for (int mb = 0; mb < kMBlocks; ++mb) {
    tile::fill(dk[mb], 0.0f);
    tile::fill(dv[mb], 0.0f);
  }
  tile::mbarrier_wait(sm.kv_full, 0);
  tile::PipelineState<Tr::kStages> st;
  const int steps = w.steps(p);
  BwdStep at = w.first_step(p);
  for (int t = 0; t < steps; ++t, w.advance(p, &at)) {
    sm.pipe.consumer_wait(st);  // lines 19-20: Q_i, L_i
    // L_i of its two rows, loaded before the GEMMs are issued (as bwd_consumer).
    const uint32_t lse = sm.lse_stage(st.index), dpsum = sm.dpsum_stage(st.index);
    const float l[2] = {__uint_as_float(ptx::ld_shared_u32(lse + 4 * row)),
                        __uint_as_float(ptx::ld_shared_u32(lse + 4 * (row + 8)))};
    // Lines 21 and 23: S = Q_i K_j^T and dP = dO_i V_j^T, its keys as N.
    float s[kKeys / 2], dp[kKeys / 2];
    tile::warpgroup_gemm_ss_abt<Tr::kMma, kKeys, typename Tr::QTile, typename Tr::KVTile>(
        s, sm.q_stage(st.index), 0, sm.k + key_row0 * 128);
    tile::mbarrier_wait(sm.do_full_bar(st.index), st.phase);
    tile::warpgroup_gemm_ss_abt<Tr::kMma, kKeys, typename Tr::QTile, typename Tr::KVTile>(
        dp, sm.do_stage(st.index), 0, sm.v + key_row0 * 128);
    // Line 24's mask, per row half h: the last key its query sees (past seqlen_k: none;
    // causal, bottom-right aligned: query + seqlen_k - seqlen_q), as a column offset from
    // first_key. Rows past seqlen_q have L = +inf (the preprocess): P = 0 there whatever the
    // mask.
    int last_col[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = at.m_block * Tr::kBlockM + row + 8 * h;
      const int last_key = Tr::kCausal && query < p.seqlen_q ? query + (p.seqlen_k - p.seqlen_q)
                                                             : p.seqlen_k - 1;
      last_col[h] = last_key - first_key;
    }
    ptx::wgmma_wait_group<1>();
    tile::pin_registers(s);
    // Line 24: P = exp2(scale_log2 S - L), a masked element's S -inf first (as
    // bwd_probabilities).
#pragma unroll
    for (int e = 0; e < kKeys / 2; ++e) {
      const int h = tile::AccLayout::half(e);
      const bool masked = tile::AccLayout::col_offset(e) > last_col[h];
      s[e] = ptx::ex2_approx(fmaf(masked ? -INFINITY : s[e], p.scale_log2, -l[h]));
    }
    const float d[2] = {__uint_as_float(ptx::ld_shared_u32(dpsum + 4 * row)),
                        __uint_as_float(ptx::ld_shared_u32(dpsum + 4 * (row + 8)))};
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(dp);
    // Line 25: dS = P (dP - D_i), in place of dP.
#pragma unroll
    for (int e = 0; e < kKeys / 2; ++e) dp[e] = s[e] * (dp[e] - d[tile::AccLayout::half(e)]);
    // P^T and dS^T of its keys to shared memory (lines 26-28's operands), once the other
    // warpgroup's GEMMs of the last step have read that step's (one tile each: no room for two).
    if (t > 0) ptx::named_barrier_sync(kBwdBarrierDsFreeBase + wg, 128 * Tr::kConsumers);
    tile::warpgroup_store_acc_transposed<typename Tr::DsTile, kKeys>(s, sm.p_tile(0), key_row0, 0,
                                                                     t_wg);
    tile::warpgroup_store_acc_transposed<typename Tr::DsTile, kKeys>(dp, sm.ds_tile(0), key_row0, 0,
                                                                     t_wg);
    ptx::fence_proxy_async_shared();  // generic-proxy stores -> wgmma (async proxy) reads
    ptx::named_barrier_sync(kBwdBarrierDsAll, 128 * Tr::kConsumers);
    // Lines 27 and 26, transposed: dK_j^T += Q_i^T dS and dV_j^T += dO_i^T P (M = its
    // head-dim columns, N = the keys, K = the queries), then line 28: its 128 columns of dQ_i
    // = dS K_j, a 64-column piece per GEMM. dK's and dV's first: they are Q_i's and dO_i's
    // last readers, and the next step's loads start when they complete (with dQ's first
    // piece between them, the next step's dP GEMM waited for dO_i: 18% of the samples). The
    // second piece's GEMM only once the first is staged: both pieces' accumulators next to
    // dK^T and dV^T would not fit the registers.
    auto dq_gemm = [&](float(&dq)[Tr::kDqPieceCols / 2], int c) {
      tile::warpgroup_gemm_ss_atb<Tr::kMma, Tr::kDqPieceCols, typename Tr::DsTile, typename Tr::KSlice>(
          dq, sm.ds_tile(0), 0, sm.k + (kv_col0 / 64 + c) * Tr::KVTile::kChunkBytes,
          tile::Accumulate::No);
    };
    // Line 28: a piece to its buffer of the ring once the dQ writer has freed it. The
    // ring takes the warpgroups' first pieces, then their second ones, so that a warpgroup's
    // buffer is freed by the adds of pieces staged before its own.
    auto stage_dq_piece = [&](const float(&dq)[Tr::kDqPieceCols / 2], int c) {
      const auto at_ring = sm.dq_ring_position(Tr::kDqPieces * t + Tr::kConsumers * c + wg);
      tile::mbarrier_wait(sm.dq_empty_bar(at_ring.slot), at_ring.phase ^ 1);
      Tr::DqStaging::warpgroup_store(dq, sm.dq_part(at_ring.slot), t_wg);
      warpgroup_publish_dq_part(sm, at_ring.slot);
    };
    static_assert(kPiecesPerWg == 2, "two dQ pieces a warpgroup");
    float dq[Tr::kDqPieceCols / 2];
    tile::warpgroup_gemm_ss_atbt<Tr::kMma, Tr::kBlockN, typename Tr::QTile, typename Tr::DsTile, kMBlocks>(
        dk, sm.q_stage(st.index), kv_col0, sm.ds_tile(0), tile::Accumulate::Yes);
    tile::warpgroup_gemm_ss_atbt<Tr::kMma, Tr::kBlockN, typename Tr::QTile, typename Tr::DsTile, kMBlocks>(
        dv, sm.do_stage(st.index), kv_col0, sm.p_tile(0), tile::Accumulate::Yes);
    dq_gemm(dq, 0);
    ptx::wgmma_wait_group<2>();  // dK
#pragma unroll
    for (int mb = 0; mb < kMBlocks; ++mb) tile::pin_registers(dk[mb]);
    sm.pipe.consumer_release(st);  // Q_i, L_i: every thread after its own reads
    ptx::wgmma_wait_group<1>();    // dV
#pragma unroll
    for (int mb = 0; mb < kMBlocks; ++mb) tile::pin_registers(dv[mb]);
    ptx::mbarrier_arrive(sm.do_empty_bar(st.index));  // dO_i, D_i
    ptx::wgmma_wait_group<0>();                       // the first dQ piece
    tile::pin_registers(dq);
    stage_dq_piece(dq, 0);
    dq_gemm(dq, 1);
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(dq);
    stage_dq_piece(dq, 1);
    // Its GEMMs of the step are complete: the other warpgroup may overwrite P^T and dS^T.
    if (t + 1 < steps)
      ptx::named_barrier_arrive(kBwdBarrierDsFreeBase + (1 - wg), 128 * Tr::kConsumers);
    st.advance();
  }
  // The tile's end (Algorithm 3 leaves it out): dK_j^T (scaled) and dV_j^T, transposed back into
  // K_j's and V_j's tiles once no GEMM of either warpgroup reads them, then out: by TMA, or (dK or
  // dV not TMA-aligned, bwd_params.h) in 4-byte pairs read back from the tiles. Keys no query sees
  // (causal) get zeros; rows past seqlen_k are dropped.
#pragma unroll
  for (int mb = 0; mb < kMBlocks; ++mb)
#pragma unroll
    for (int e = 0; e < Tr::kBlockN / 2; ++e) dk[mb][e] *= p.scale;
  ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
#pragma unroll
  for (int mb = 0; mb < kMBlocks; ++mb) {
    tile::warpgroup_store_acc_transposed<typename Tr::KVTile, Tr::kBlockN>(dk[mb], sm.k, 0,
                                                                           kv_col0 + 64 * mb, t_wg);
    tile::warpgroup_store_acc_transposed<typename Tr::KVTile, Tr::kBlockN>(dv[mb], sm.v, 0,
                                                                           kv_col0 + 64 * mb, t_wg);
  }
  ptx::fence_proxy_async_shared();  // generic-proxy stores -> the TMA's (async proxy) reads
  ptx::named_barrier_sync(kBwdBarrierEpilogue, 128 * Tr::kConsumers);
  if (p.dkv_tma) {
    if (wg == 0 && t_wg == 0) bwd_store_dkv_tma<Tr>(p, sm, w);
    return;
  }
  constexpr int kPairsPerRow = Tr::kHeadDim / 2;
  for (int i = 128 * wg + t_wg; i < Tr::kBlockN * kPairsPerRow; i += 128 * Tr::kConsumers) {
    const int key_in_block = i / kPairsPerRow, col = 2 * (i % kPairsPerRow);
    const int key = w.n_block * Tr::kBlockN + key_in_block;
    if (key >= p.seqlen_k) continue;
    const uint32_t at = Tr::KVTile::offset(key_in_block, col);
    const int64_t k_at = w.batch * p.dk_stride[0] + key * p.dk_stride[1] +
                         w.kv_head * p.dk_stride[2] + col;
    const int64_t v_at = w.batch * p.dv_stride[0] + key * p.dv_stride[1] +
                         w.kv_head * p.dv_stride[2] + col;
    *reinterpret_cast<uint32_t*>(p.dk + k_at) = ptx::ld_shared_u32(sm.k + at);
    *reinterpret_cast<uint32_t*>(p.dv + v_at) = ptx::ld_shared_u32(sm.v + at);
  }
}

// The threads of a _pt CTA that walk its tiles.
enum class BwdRole { Producer = 0, DqWriter = 1, DkvStorer = 2, Consumer = 3 };

// _pt: the tiles a CTA takes. Without ordered adds, tile blockIdx.x first and then those the
// producer draws from the workspace's counter (the first wave's tiles are never drawn). With
// ordered adds (a tile waits for the tiles ranked before it at a query block, which come earlier
// in bwd_tile_at's order) every tile is drawn, the first one too (thread 0, before the CTA's
// roles start): then each tile a CTA waits for was drawn before, by a CTA that has started. With
// a first tile by blockIdx.x, a CTA's drawn tile could wait for the first tile of a CTA not yet
// on an SM; where other grids hold the SMs (calls on other streams), two such grids, each
// holding SMs while it waits for CTAs of its own that cannot start, would hang the GPU (a
// suspect of v82's hang; not the whole of it: docs/perf-history.md v83). The first draw comes
// after the wait for the preprocess, which zeroed the counter. The counter then counts every
// tile, not the tiles past the first wave.
__device__ __forceinline__ uint32_t bwd_draw_tile(const BwdParams& p) {
  return (p.ordered_adds ? 0u : gridDim.x) + atomicAdd(p.tile_counter, 1u);
}
// kSplitsLastWave: the item of draw d (a whole tile, or a chunk's first piece: bwd_piece_at),
// or -1 past the last draw.
__device__ __forceinline__ int bwd_item_of_draw(const BwdParams& p, uint32_t d) {
  if (d >= static_cast<uint32_t>(p.split_draws)) return -1;
  const int draw = static_cast<int>(d);
  return draw < p.split_first ? draw : p.split_first + 2 * (draw - p.split_first);
}
template <class Tr>
__device__ __forceinline__ void bwd_first_tile(const BwdParams& p, const BwdSmem<Tr>& sm) {
  if (!p.ordered_adds) return;
  ptx::griddepcontrol_wait();
  ptx::st_shared_u32(sm.first_tile_home(), bwd_draw_tile(p));
}

// _pt: runs role(work, carry) on each of the CTA's tiles (bwd_draw_tile): the first one, then
// each next one as the producer draws it once it has issued the last one's loads and publishes
// it in tile slot k % 2 (k: the tiles before), which the other roles read at the end of their
// tile k. A CTA started after the others drew every tile has none.
template <class Tr, BwdRole R, class Role>
__device__ __forceinline__ void bwd_for_each_tile(const BwdParams& p, const BwdSmem<Tr>& sm,
                                                  Role&& role) {
  // Warpgroup 0's roles run in 24 registers: their carry waits in shared memory while the
  // tile runs (in a register, the dQ writer spilled).
  constexpr bool kCarryHome = R != BwdRole::Consumer;
  const uint32_t home = sm.carry_home(static_cast<int>(R));
  BwdCarry c;
  int tile = p.ordered_adds ? static_cast<int>(ptx::ld_shared_u32(sm.first_tile_home()))
                            : static_cast<int>(blockIdx.x);
  if constexpr (Tr::kSplitsLastWave) {
    // Items, not tiles (bwd_piece_at); -1: none.
    tile = bwd_item_of_draw(p, static_cast<uint32_t>(tile));
    if (tile < 0) return;
  } else if (tile >= p.num_tiles) {
    return;
  }
  for (;;) {
    const BwdWork<Tr> w(p, tile);
    if constexpr (Tr::kSplitsLastWave) {
      // What the loop needs after the role, in shared memory during it (in registers the
      // 24-register roles spilled): the carry after this item, and the producer's next item
      // where the chunk goes on (-1: a draw).
      BwdCarry after = c;
      after.advance(w.steps(p));
      if constexpr (kCarryHome) ptx::st_shared_u32(home, after.bits);
      if constexpr (R == BwdRole::Producer)
        ptx::st_shared_u32(sm.chained_item_home(), static_cast<uint32_t>(w.next_too ? tile + 1 : -1));
      role(w, c);
      c.bits = kCarryHome ? ptx::ld_shared_u32(home) : after.bits;
    } else {
      if constexpr (kCarryHome) ptx::st_shared_u32(home, c.bits);
      role(w, c);
      if constexpr (kCarryHome) c.bits = ptx::ld_shared_u32(home);
    }
    // The tile slot of this item (kSplitsLastWave: the carry has advanced past it).
    const uint32_t k = Tr::kSplitsLastWave ? (c.tiles() + 3u) & 3u : c.tiles();
    int next;
    if constexpr (R == BwdRole::Producer) {
      // The draws come after the first tile's wait for the preprocess, which zeroed the
      // counter (griddepcontrol_wait in bwd_producer, or bwd_first_tile).
      if constexpr (Tr::kSplitsLastWave) {
        next = static_cast<int>(ptx::ld_shared_u32(sm.chained_item_home()));
        if (next < 0) next = bwd_item_of_draw(p, bwd_draw_tile(p));
      } else {
        next = static_cast<int>(bwd_draw_tile(p));
      }
      tile::mbarrier_wait_idle(sm.tile_empty_bar(k), ((k >> 1) & 1) ^ 1);
      ptx::st_shared_u32(sm.tile_slot(k), static_cast<uint32_t>(next));
      ptx::mbarrier_arrive(sm.tile_full_bar(k));
    } else {
      tile::mbarrier_wait(sm.tile_full_bar(k), (k >> 1) & 1);
      next = static_cast<int>(ptx::ld_shared_u32(sm.tile_slot(k)));
      ptx::mbarrier_arrive(sm.tile_empty_bar(k));
    }
    if constexpr (Tr::kSplitsLastWave) {
      if (next < 0) return;
    } else {
      c.advance(w.steps(p));
      if (next >= p.num_tiles) return;
    }
    tile = next;
  }
}

template <class C>
__device__ __forceinline__ void bwd_kernel(const BwdParams& p) {
  using Tr = BwdTraits<C>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = (ptx::smem_address(smem_raw) + 1023u) & ~1023u;
  const BwdSmem<Tr> sm(base);
  // Under programmatic dependent launch the postprocess may be scheduled once every CTA of
  // this grid has started: on the SMs the last CTAs leave, it waits for the grid's completion
  // (griddepcontrol_wait) instead of being launched after it.
  ptx::griddepcontrol_launch_dependents();
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(sm.kv_full, 1);
    sm.pipe.init(128 * Tr::kConsumers);
    if (Tr::kSplitQdo)
      for (int s = 0; s < Tr::kStages; ++s) {
        ptx::mbarrier_init(sm.do_full_bar(s), 1);
        ptx::mbarrier_init(sm.do_empty_bar(s), 128 * Tr::kConsumers);
      }
    for (int slot = 0; slot < Tr::kDqSlots; ++slot) {
      ptx::mbarrier_init(sm.dq_full_bar(slot), 128);
      ptx::mbarrier_init(sm.dq_empty_bar(slot), 1);
    }
    if (Tr::kPersistent) {
      ptx::mbarrier_init(sm.kv_empty, 128 * Tr::kConsumers);
      for (uint32_t k = 0; k < 2; ++k) {
        ptx::mbarrier_init(sm.tile_full_bar(k), 1);
        ptx::mbarrier_init(sm.tile_empty_bar(k), 2 + 128 * Tr::kConsumers);
      }
      for (int wg = 0; wg < Tr::kConsumers; ++wg) ptx::mbarrier_init(sm.dkv_full_bar(wg), 128);
      if (Tr::kDvInDs) ptx::mbarrier_init(sm.dv_read, 1);
      bwd_first_tile<Tr>(p, sm);
      if (Tr::kKDouble)
        for (uint32_t b = 0; b < 2; ++b) {
          ptx::mbarrier_init(sm.k_full_bar(b), 1);
          ptx::mbarrier_init(sm.k_empty_bar(b), 128 * Tr::kConsumers);
        }
      if (Tr::kKvReleasedApart) ptx::mbarrier_init(sm.k_empty_bar(0), 128 * Tr::kConsumers);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if constexpr (!Tr::kPersistent) {
    const BwdWork<Tr> w(p, static_cast<int>(blockIdx.x));
    const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<Tr::kProducerRegs>();
      if (threadIdx.x == 0) bwd_producer<Tr>(p, sm, w, BwdCarry{});
      if (threadIdx.x == 32) {
        bwd_dq_writer<Tr>(p, sm, w, BwdCarry{});
        ptx::bulk_wait_group<0>();  // the last adds have read shared memory before the CTA exits
      }
    } else {
      ptx::setmaxnreg_inc<Tr::kConsumerRegs>();
      if constexpr (Tr::kKvTransposed)
        bwd_consumer_transposed<Tr>(p, sm, w, warpgroup - 1);
      else
        bwd_consumer<Tr>(p, sm, w, BwdCarry{}, warpgroup - 1);
    }
  } else {
    const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<Tr::kProducerRegs>();
      if (threadIdx.x == 0)
        bwd_for_each_tile<Tr, BwdRole::Producer>(p, sm, [&](const BwdWork<Tr>& w, const BwdCarry& c) {
          bwd_producer<Tr>(p, sm, w, c);
        });
      if (threadIdx.x == 32) {
        bwd_for_each_tile<Tr, BwdRole::DqWriter>(p, sm, [&](const BwdWork<Tr>& w, const BwdCarry& c) {
          bwd_dq_writer<Tr>(p, sm, w, c);
        });
        ptx::bulk_wait_group<0>();  // the last adds have read shared memory before the CTA exits
      }
      if (threadIdx.x == 64) {
        bwd_for_each_tile<Tr, BwdRole::DkvStorer>(p, sm, [&](const BwdWork<Tr>& w, const BwdCarry& c) {
          bwd_dkv_storer<Tr>(p, sm, w, c);
        });
        ptx::bulk_wait_group<0>();  // as the last stores
      }
    } else {
      ptx::setmaxnreg_inc<Tr::kConsumerRegs>();
      bwd_for_each_tile<Tr, BwdRole::Consumer>(p, sm, [&](const BwdWork<Tr>& w, const BwdCarry& c) {
        bwd_consumer<Tr>(p, sm, w, c, warpgroup - 1);
      });
    }
  }
}

// Where a query block's counter starts (the preprocess, shared by the main entry and _lf): 0
// (the _fs tickets; ordered adds in K/V block order, K/V block 0 first), or for the _lf entry
// (kOrderedLastFirst) its first adder's rank (BwdWork::add_rank: its last adder's,
// num_n_blocks - adders) with kDqFirstTurn (bwd_dq_adder).
template <class Tr>
__device__ __forceinline__ int32_t bwd_dq_counter_start(const BwdParams& p, int m_block) {
  if (!Tr::kHasLastFirst || p.ordered_adds != kOrderedLastFirst) return 0;
  return (p.num_n_blocks - bwd_adders<Tr>(p, m_block)) | kDqFirstTurn;
}

// The query block of (head, batch) a CTA of the pre- or postprocess takes: the grid's blocks
// in reverse, the last batch, head and query block first. The main kernel starts with the
// first (batch, K/V head) pairs and ends with the last ones (bwd_tile_at), so the preprocess's
// last writes (the first pairs' zeroed dQ accumulator, LSE and D) and the main kernel's last
// adds (the last pairs' accumulator) are still in L2 when the next kernel reads them first
// (A/B: +0.5-1.7% at 512-1k, level from 2k).
struct BwdAuxBlock {
  int m_block, head, batch;
  __device__ __forceinline__ BwdAuxBlock()
      : m_block(static_cast<int>(gridDim.x - 1 - blockIdx.x)),
        head(static_cast<int>(gridDim.y - 1 - blockIdx.y)),
        batch(static_cast<int>(gridDim.z - 1 - blockIdx.z)) {}
};

// Whether every 8-element piece (8 head-dim columns from a multiple of 8) of a 16-bit tensor
// with these (batch, seqlen, head) element strides is 16-byte aligned: one 16-byte access
// each; otherwise the 4-byte pairs the argument checks guarantee.
__device__ __forceinline__ bool pieces_16b_aligned(const uint16_t* data, const int64_t (&stride)[3]) {
  return reinterpret_cast<uintptr_t>(data) % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0 &&
         stride[2] % 8 == 0;
}

// A 16-bit value of the kernel's dtype as a float.
template <class Tr>
__device__ __forceinline__ float to_f32(uint32_t bits) {
  return Tr::kIsBF16 ? ptx::bf16_to_f32(static_cast<uint16_t>(bits))
                     : ptx::f16_to_f32(static_cast<uint16_t>(bits));
}

// Line 1, and what the main kernel's loads need: for the block_m rows of a query block of
// (head, batch) (BwdAuxBlock): D = rowsum(dO * O) in fp32, the LSE in log2 units (+inf past
// seqlen_q and where the forward saw no key, so that P = 0 there), the dQ accumulator rows
// zeroed (ordered adds and _fs: only where no K/V block adds, the first writer stores), the
// query block's counter started (ordered adds and _fs; bwd_dq_counter_start) and (_pt) the
// tile counter. head_dim / 8 threads a row, 8 elements each (16-byte loads where O and dO
// allow them), the loads of 8 rows a thread issued before their first sum: with a warp a row,
// 4-byte loads and a row at a time, the kernel took 78 us at d128 causal 1k against the public
// FA3's 65 (now 67); 16 rows a thread at d256 took 168 registers and 76 us (8 rows: 71 us,
// the public FA3 67).
template <class C>
__device__ __forceinline__ void bwd_preprocess(const BwdParams& p) {
  using Tr = BwdTraits<C>;
  constexpr int kRowThreads = Tr::kHeadDim / 8;
  constexpr int kRowsPerPass = kBwdAuxThreads / kRowThreads;
  constexpr int kPasses = Tr::kBlockM / kRowsPerPass;
  // Passes whose loads are in flight together: the largest divisor of kPasses up to 8 (80-row
  // blocks: 5 of 10).
  constexpr int kBatch = [] {
    int b = kPasses < 8 ? kPasses : 8;
    while (kPasses % b != 0) --b;
    return b;
  }();
  static_assert(kRowThreads <= 32 && Tr::kBlockM % kRowsPerPass == 0 && kPasses % kBatch == 0,
                "whole rows per warp, whole batches");
  // The main kernel may start on the SMs this grid's last CTAs leave: its K_j and V_j
  // loads need nothing from here, the rest waits (griddepcontrol_wait).
  ptx::griddepcontrol_launch_dependents();
  const BwdAuxBlock at;
  const int m_block = at.m_block, head = at.head, batch = at.batch;
  const int col = 8 * (static_cast<int>(threadIdx.x) % kRowThreads);
  const int row_in_pass = static_cast<int>(threadIdx.x) / kRowThreads;
  const int64_t bh = static_cast<int64_t>(batch) * p.heads + head;
  const bool wide = pieces_16b_aligned(p.o, p.o_stride) && pieces_16b_aligned(p.dout, p.do_stride);
#pragma unroll 1
  for (int pass0 = 0; pass0 < kPasses; pass0 += kBatch) {
    uint4 o8[kBatch], do8[kBatch];
    float lse[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int row = m_block * Tr::kBlockM + (pass0 + i) * kRowsPerPass + row_in_pass;
      o8[i] = do8[i] = make_uint4(0u, 0u, 0u, 0u);
      lse[i] = -INFINITY;
      if (row >= p.seqlen_q) continue;
      if (col == 0) lse[i] = p.lse[bh * p.seqlen_q + row];
      const uint16_t* o =
          p.o + batch * p.o_stride[0] + row * p.o_stride[1] + head * p.o_stride[2] + col;
      const uint16_t* dout =
          p.dout + batch * p.do_stride[0] + row * p.do_stride[1] + head * p.do_stride[2] + col;
      if (wide) {
        o8[i] = *reinterpret_cast<const uint4*>(o);
        do8[i] = *reinterpret_cast<const uint4*>(dout);
      } else {  // 4-byte pairs (the argument checks: even strides)
        const uint32_t* o2 = reinterpret_cast<const uint32_t*>(o);
        const uint32_t* do2 = reinterpret_cast<const uint32_t*>(dout);
        o8[i] = make_uint4(o2[0], o2[1], o2[2], o2[3]);
        do8[i] = make_uint4(do2[0], do2[1], do2[2], do2[3]);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const uint32_t ow[4] = {o8[i].x, o8[i].y, o8[i].z, o8[i].w};
      const uint32_t dw[4] = {do8[i].x, do8[i].y, do8[i].z, do8[i].w};
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < 4; ++w)
        sum += to_f32<Tr>(ow[w] & 0xffffu) * to_f32<Tr>(dw[w] & 0xffffu) +
               to_f32<Tr>(ow[w] >> 16) * to_f32<Tr>(dw[w] >> 16);
#pragma unroll
      for (int offset = kRowThreads / 2; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      const int row = m_block * Tr::kBlockM + (pass0 + i) * kRowsPerPass + row_in_pass;
      if (col == 0) {
        p.dpsum[bh * p.seqlen_q_rounded + row] = sum;
        p.lse_log2[bh * p.seqlen_q_rounded + row] =
            lse[i] == -INFINITY ? INFINITY : lse[i] * 1.4426950408889634f;
      }
    }
  }
  // The dQ accumulator zeroed for the adds; where a query block's first writer stores its
  // parts instead (ordered adds, _fs: bwd_dq_writer) only the blocks no K/V block adds to
  // need zeros (causal rows that see no key: their dQ is 0).
  if ((!p.ordered_adds && !Tr::kFirstStore) || bwd_adders<Tr>(p, m_block) == 0) {
    float4* accum = reinterpret_cast<float4*>(p.dq_accum + (bh * p.seqlen_q_rounded +
                                                            m_block * Tr::kBlockM) * Tr::kHeadDim);
#pragma unroll 8
    for (int i = threadIdx.x; i < Tr::kBlockM * Tr::kHeadDim / 4; i += kBwdAuxThreads)
      accum[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  if ((p.ordered_adds || Tr::kFirstStore) && threadIdx.x == 0)
    p.dq_semaphore[bh * p.num_m_blocks + m_block] = bwd_dq_counter_start<Tr>(p, m_block);
  // _pt: the main kernel's tile counter.
  if (Tr::kPersistent && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
    *p.tile_counter = 0;
  // kSplitsLastWave: the split tiles' counters (bwd_sum_split_tile).
  if (Tr::kSplitsLastWave && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
    for (int i = threadIdx.x; i < p.num_tiles - p.split_first; i += kBwdAuxThreads)
      p.split_counters[i] = 0;
}

// After Algorithm 3 (which leaves it out): dQ = scale * the accumulator, converted to the dtype,
// for the block_m rows of a query block of (head, batch) (BwdAuxBlock). The accumulator block is in
// DqAccumLayout: each 16-byte load is one thread's 4 values of an 8-column group of the main
// kernel's fragments (rows r and r + 8, two columns each). They go to a row-major tile in shared
// memory first, so that dQ is written in whole rows: written straight from the fragment order, each
// 32-byte sector took two partial writes (the kernel ran 3.7x as long as the public FA3's at d128
// 1k).
template <class C>
__device__ __forceinline__ void bwd_postprocess(const BwdParams& p) {
  using Tr = BwdTraits<C>;
  using Order = tile::AccFragmentOrder;
  // A row of the tile: head_dim / 2 value pairs and 4 words of padding (16-byte rows for the
  // copy out; 8 rows of a warp's fragment stores fall on distinct banks).
  constexpr int kRowWords = Tr::kHeadDim / 2 + 4;
  __shared__ __align__(16) uint32_t tile[Tr::kBlockM * kRowWords];
  const BwdAuxBlock at;
  const int m_block = at.m_block, head = at.head, batch = at.batch;
  ptx::griddepcontrol_wait();  // the main kernel's adds (programmatic dependent launch)
  const int64_t bh = static_cast<int64_t>(batch) * p.heads + head;
  constexpr int kBandFloats = 64 * Tr::kHeadDim;
  const float4* block = reinterpret_cast<const float4*>(
      p.dq_accum + (bh * p.seqlen_q_rounded + m_block * Tr::kBlockM) * Tr::kHeadDim);
  if constexpr (Tr::kDqTransposed) {
    // Runs of dQ^T (DqAccumLayout::transposed_float_index): a 16-byte load is head-dim rows
    // r and r + 8 of two query columns, so each value goes to the tile on its own.
    constexpr int kRunFloats = 64 * Tr::kBlockM;
    uint16_t* tile16 = reinterpret_cast<uint16_t*>(tile);
#pragma unroll 8
    for (int i = threadIdx.x; i < Tr::kBlockM * Tr::kHeadDim / 4; i += kBwdAuxThreads) {
      const int f = 4 * i, run = f / kRunFloats;
      const int col = 64 * run + Order::row_of(f % kRunFloats), row = Order::col_of(f % kRunFloats);
      const float4 a = block[i];
      const float v[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float x = v[j] * p.scale;
        tile16[(row + j % 2) * 2 * kRowWords + col + 8 * (j / 2)] = static_cast<uint16_t>(
            Tr::kIsBF16 ? ptx::pack_bf16x2(x, 0.0f) : ptx::pack_f16x2(x, 0.0f));
      }
    }
  } else {
#pragma unroll 8
    for (int i = threadIdx.x; i < Tr::kBlockM * Tr::kHeadDim / 4; i += kBwdAuxThreads) {
      const int f = 4 * i, band = f / kBandFloats;
      const int row = 64 * band + Order::row_of(f % kBandFloats), col = Order::col_of(f % kBandFloats);
      const float4 a = block[i];
      tile[row * kRowWords + col / 2] = Tr::kIsBF16 ? ptx::pack_bf16x2(a.x * p.scale, a.y * p.scale)
                                                    : ptx::pack_f16x2(a.x * p.scale, a.y * p.scale);
      tile[(row + 8) * kRowWords + col / 2] = Tr::kIsBF16
                                                  ? ptx::pack_bf16x2(a.z * p.scale, a.w * p.scale)
                                                  : ptx::pack_f16x2(a.z * p.scale, a.w * p.scale);
    }
  }
  __syncthreads();
  // Out in 16-byte pieces where dq allows it (16-byte aligned data and strides), else in the
  // 4-byte pairs the argument checks guarantee.
  const bool wide = pieces_16b_aligned(p.dq, p.dq_stride);
  constexpr int kPieces = Tr::kHeadDim / 8;  // 16-byte pieces of a row
#pragma unroll 4
  for (int i = threadIdx.x; i < Tr::kBlockM * kPieces; i += kBwdAuxThreads) {
    const int r = i / kPieces, piece = i % kPieces, row = m_block * Tr::kBlockM + r;
    if (row >= p.seqlen_q) continue;
    uint16_t* out = p.dq + batch * p.dq_stride[0] + static_cast<int64_t>(row) * p.dq_stride[1] +
                    head * p.dq_stride[2] + 8 * piece;
    const uint32_t* in = tile + r * kRowWords + 4 * piece;
    if (wide) {
      *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(in);
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w) reinterpret_cast<uint32_t*>(out)[w] = in[w];
    }
  }
}

}  // namespace fa3
