// The one Config of the forward kernel family, shared by the device code (compiled once per
// config) and the host runtime. Every choice a forward kernel makes is a field here; nothing
// else changes its code. A kernel's name spells its config (fwd_names.h holds the grammar,
// the one place each name token is defined and explained).
//
// Choices that exclude each other are one enum, so that most invalid combinations cannot be
// written at all; fwd_config_is_valid states the few rules between fields that remain.
#pragma once

#include <stdint.h>

namespace fa3 {

enum class DType : int { F16 = 0, BF16 = 1 };

// How a consumer warpgroup walks its key blocks.
enum class Loop : int {
  // Paper Algorithm 1 as written: each GEMM is waited for before the softmax that needs it
  // (the "no GEMM-softmax pipelining" row of the paper's Table 2).
  Sequential,
  // Algorithm 2: QK^T of block j is issued with PV of block j-1 and the softmax of block j
  // runs under the PV GEMM. The production loop.
  Pipelined,
  // Lab: 3-stage pipelining (the paper's Appendix, Algorithm 4 here): QK^T_{j+1} and
  // PV_{j-1} both in flight under softmax_j. Needs a second S and P in registers, so it
  // only fits key blocks up to n80 at d128, and loses there (the fixed costs of a step are
  // paid every 64-80 keys).
  ThreeStage,
  // Lab: Algorithm 2 with P in two register buffers, so the loop holds no wait_group 0 and
  // ptxas cannot hoist the PV wait into the softmax. Costs block_n/4 registers; spills at
  // d128 n128 and d256.
  DoubleP,
  // Algorithm 2 in the order of the paper's Appendix B.2 SASS: softmax first, then the next
  // QK^T and this block's PV, one wait_group 0 per step. Kept for fa3-sass's B.2 check;
  // 1-5% slower than Pipelined on an H100 (the row max no longer runs under a GEMM).
  B2Order,
};

// How the row max of the online softmax moves.
enum class RowMax : int {
  Exact,  // the running max, the factor exp2(m_old - m_new) applied to O every block
  // FlashAttention-4's lazy rescale: a row keeps its max until a block's max exceeds it by
  // more than 2^8 (P~ <= 256 then), so after the first blocks the factor is exactly 1 and a
  // warp whose rows kept their max skips O's rescale (a vote and a branch). Pays at d256
  // (+1-3%), +0.4-0.8% at d128 causal; costs 1.5-4% at d64.
  Lazy,
  // Lazy, with a block's row maxima taken as the largest 32-bit integer among the scores'
  // bit patterns, three at a time (VIMNMX3; sm_90's float max has two operands): exact
  // whenever the max is positive, which is all the lazy test needs while every row of the
  // warp keeps m >= -8 (tile::OnlineSoftmax). Half the row max's instructions.
  LazyIntMax,
};

// How tiles (blocks of block_m query rows of one batch and head) map onto CTAs.
enum class Tiles : int {
  PerCta,  // one CTA per tile
  // Persistent grid, one CTA per SM: the K/V pipeline runs on from tile to tile, and O has
  // a shared-memory tile of its own where it fits (d64, d128 n128), so the next Q loads
  // under the epilogue; elsewhere O goes over Q. Causal tiles are drawn longest first from a
  // counter, in groups of heads whose K/V fit in L2.
  Persistent,
  // Persistent, tiles pipelined into each other: a tile's last PV GEMM goes out in one
  // pingpong turn with the next tile's first QK^T, and its epilogue runs right after the next
  // tile's first softmax (Q double-buffered, O staged over its own Q). The per-tile cost
  // drops to about one key block at d128.
  CrossTile,
  // CrossTile, and a second producer warp loads Q (and draws the dynamic scheduler's
  // tiles) as soon as a Q buffer frees, instead of the K/V thread after the previous tile's
  // last K/V load: short tiles find their Q loaded.
  CrossTileQWarp,
  // CrossTileQWarp with three Q buffers: the buffer a tile's O is stored from is needed
  // again three tiles later, so the thread that issued the store hands it back in the next
  // tile's epilogue, and no warp waits for the store's read (that wait took ~5% of the warp
  // samples at d64 causal 1k).
  CrossTileQWarp3,
  // CrossTileQWarp (two buffers), and the Q warp stores each tile's O: the consumers write
  // O over the tile's Q buffer and go on, where they would wait for the store to read it.
  CrossTileQWarpStoresO,
};

// Who issues the TMA loads.
enum class Producer : int {
  Warpgroup,  // a producer warpgroup that gives its registers away (paper Algorithm 1)
  // No warp specialization (the ablation of the paper's Table 2): the first consumer thread
  // issues every load between its own GEMMs, and every warpgroup keeps the launch's
  // register share.
  InlineConsumer,
};

struct FwdConfig {
  DType dtype = DType::BF16;
  int head_dim = 128;
  int block_m = 128;            // Br: query rows per CTA = 64 * consumer_warpgroups
  int block_n = 128;            // Bc: key rows per mainloop iteration
  int stages = 2;               // depth of the K/V circular shared-memory buffer
  int consumer_warpgroups = 2;  // one producer warpgroup + this many consumers
  bool causal = false;
  Loop loop = Loop::Sequential;
  RowMax row_max = RowMax::Exact;
  Tiles tiles = Tiles::PerCta;
  Producer producer = Producer::Warpgroup;
  // Pingpong scheduling (paper Section 3.1, Fig. 1): named barriers give the consumer
  // warpgroups turns at issuing their GEMMs, so one's softmax runs under another's GEMMs.
  bool pingpong = false;
  // Persistent, non-causal: tiles handed out through the launch's counter in the static
  // walk's order (as causal persistent kernels always are), instead of CTA i taking tiles
  // i, i + grid, ...: a CTA that runs slower takes fewer tiles, and the tiles in flight stay
  // a window of neighbours (one or two heads' K/V in L2).
  bool dynamic_schedule = false;
  // Key blocks visited first to last (the causal diagonal last) instead of last to first:
  // causal CTAs started together on one head then ask for the same K/V block at about the
  // same moment, as non-causal CTAs do. +1.5-3% at d256 n64 persistent causal.
  bool ascending = false;
  // A consumer warpgroup for which every key in the upper half of a block is masked (the
  // causal diagonal's upper-right quadrant, the seqlen_k tail) computes that block's QK^T
  // (N = block_n/2) and softmax at half width, and its PV too where it can: +0.7-1.5% for
  // d128 persistent causal at 512-2k, +1-3% for d64 m128 cross-tile causal at 1k-4k.
  bool half_blocks = false;
  // With cross-tile tiles: QK^T takes Q from registers (RS-wgmma), loaded once per tile, so
  // the key blocks of a tile read only K from shared memory (a fifth less shared-memory
  // traffic per block at d128, whose energy counts at the power cap). Two consumer
  // warpgroups only: with three the d64 kernel spilled.
  bool q_in_registers = false;
  // The softmax row sums l by the tensor cores: every V stage carries a 128-byte column chunk
  // of ones after its head_dim columns, and the PV GEMM is N = head_dim + 8 wide, so its 8
  // extra columns (4 more accumulators per thread) each get P's row sums, instead of
  // block_n/2 FADDs per thread and key block (the softmax is issue-bound): +0.6-1.9% at d128
  // non-causal, +1-2.5% at d64 with the lazy row max. Those sums add P~ rounded to 16 bits,
  // as O does, which normalizes O exactly but puts an LSE from them off by up to 1.6e-3 in
  // bf16: such a kernel serves calls that ask for no LSE (inference) only, and the runtime
  // runs its twin without row_sum_mma, which sums in fp32, for calls that do. Pipelined loop,
  // head dims up to 128 (the widest wgmma is N = 256).
  bool row_sum_mma = false;
  // Lab, with the Pipelined loop: a step's exponentials wait for its PV GEMM (only the row
  // max runs under it), where ptxas otherwise places that wait after the first exponentials
  // in some kernels. Measured: no consistent effect (+-2%).
  bool exp_after_pv_wait = false;
  // Lab: L2 eviction priorities on the TMA copies (createpolicy): Q loads and O stores
  // evict-first (each byte is used once), K and V loads evict-last (every query block of a
  // head reads them again).
  bool evict_first_q_o = false;
  bool evict_last_kv = false;
  // Lab: CTAs per thread-block cluster (1 or 2). The 2 CTAs of a cluster compute
  // neighbouring query blocks of one head and share every K/V block: each loads half and TMA
  // multicasts it into both. Non-causal, one CTA per tile. Measured 5-16% slower up to 4k,
  // within 2% from 8k.
  int cluster_m = 1;

  // What the fields above imply, in the words the kernel code uses.
  constexpr bool overlap() const { return loop != Loop::Sequential; }
  constexpr bool three_stage() const { return loop == Loop::ThreeStage; }
  constexpr bool double_p() const { return loop == Loop::DoubleP; }
  constexpr bool b2_order() const { return loop == Loop::B2Order; }
  constexpr bool conditional_rescale() const { return row_max != RowMax::Exact; }
  constexpr bool int_max() const { return row_max == RowMax::LazyIntMax; }
  constexpr bool persistent() const { return tiles != Tiles::PerCta; }
  constexpr bool cross_tile() const { return persistent() && tiles != Tiles::Persistent; }
  constexpr bool q_warp() const { return cross_tile() && tiles != Tiles::CrossTile; }
  constexpr bool three_q_buffers() const { return tiles == Tiles::CrossTileQWarp3; }
  constexpr bool q_warp_stores_o() const { return tiles == Tiles::CrossTileQWarpStoresO; }
  constexpr bool warp_specialized() const { return producer == Producer::Warpgroup; }

  // Register split for setmaxnreg (paper Algorithm 1 lines 3 and 12). The sum over
  // warpgroups of 128 * regs must stay within the 64K-register file.
  // Without warp specialization there is no split: 0 for both.
  constexpr int producer_regs() const {
    return !warp_specialized() ? 0 : consumer_warpgroups == 2 ? 24 : 32;
  }
  constexpr int consumer_regs() const {
    return !warp_specialized() ? 0 : consumer_warpgroups == 2 ? 240 : 160;
  }
  constexpr int threads() const {
    return 128 * ((warp_specialized() ? 1 : 0) + consumer_warpgroups);
  }
  // Tiles handed out through the launch's tile counter (the runtime allocates one per stream):
  // causal persistent kernels always, non-causal persistent ones with dynamic_schedule.
  constexpr bool draws_tiles() const { return persistent() && (causal || dynamic_schedule); }
};

// Shared memory a forward CTA may use: 227 KB per block, less the kernel's own 1 KB of static
// shared memory (the aligned extern declaration).
constexpr uint32_t kFwdSmemLimit = 227u * 1024u - 1024u;

// The dynamic scheduler's tile slots: per Q buffer, the tile and its decoded (query block,
// head, batch), four 32-bit words (fwd/scheduler.cuh, tile_record).
constexpr uint32_t fwd_tile_slot_bytes(uint32_t q_buffers) { return 16u * q_buffers; }

// Shared-memory plan of a forward CTA, in bytes from a 1024-byte aligned base. Every tile
// is stored as head_dim/64 column chunks of rows x 128 bytes with the 128-byte swizzle,
// the layout both TMA (SWIZZLE_128B) and the wgmma descriptors use.
struct FwdSmemLayout {
  uint32_t q_offset, q_bytes;            // Q_i (cross-tile: two or three buffers, q_bytes apart)
  uint32_t q_buffers;
  uint32_t o_offset;                     // O_i (q_bytes): over Q_i, or (persistent, where it
                                         // fits) its own tile
  uint32_t k_offset, kv_stage_bytes;     // K stages, then V stages
  uint32_t v_offset, v_stage_bytes;      // row_sum_mma: a V stage and one chunk of ones
  uint32_t barrier_offset;               // mbarriers: q_full[q_buffers], q_empty[q_buffers],
                                         // k_full[s], k_empty[s], v_full[s], v_empty[s]; then
                                         // the tile record of each Q buffer (16 bytes);
                                         // q warp: tile_ready[q_buffers], draw_go
  uint32_t total_bytes;                  // including the slack to align the base to 1024

  static constexpr FwdSmemLayout of(const FwdConfig& c) {
    FwdSmemLayout l{};
    l.q_offset = 0;
    l.q_bytes = static_cast<uint32_t>(c.block_m * c.head_dim * 2);
    l.q_buffers = c.cross_tile() ? (c.three_q_buffers() ? 3 : 2) : 1;
    l.kv_stage_bytes = static_cast<uint32_t>(c.block_n * c.head_dim * 2);
    l.k_offset = l.q_offset + l.q_bytes * l.q_buffers;
    l.v_offset = l.k_offset + l.kv_stage_bytes * c.stages;
    l.v_stage_bytes =
        l.kv_stage_bytes + (c.row_sum_mma ? static_cast<uint32_t>(c.block_n * 128) : 0u);
    const uint32_t kv_end = l.v_offset + l.v_stage_bytes * c.stages;
    // The tile slots (16 bytes per Q buffer, 16-byte aligned after the barriers before
    // them); the Q warp adds a tile_ready barrier per Q buffer and draw_go (fwd/traits.cuh).
    const uint32_t barrier_bytes = 8u * (2 * l.q_buffers + 4 * c.stages) +
                                   fwd_tile_slot_bytes(l.q_buffers) +
                                   (c.q_warp() ? 8u * l.q_buffers + 8u : 0u);
    const uint32_t slack = 1024;  // to align the base to 1024
    const bool own_o = c.persistent() && !c.cross_tile() &&
                       kv_end + l.q_bytes + barrier_bytes + slack <= kFwdSmemLimit;
    l.o_offset = own_o ? kv_end : l.q_offset;
    l.barrier_offset = own_o ? l.o_offset + l.q_bytes : kv_end;
    l.total_bytes = l.barrier_offset + barrier_bytes + slack;
    return l;
  }
  constexpr bool o_over_q() const { return o_offset == q_offset; }
};

// The rules between fields that the enums leave, each a constraint the kernel code relies on.
// Pingpong orders the GEMM pairs of an overlapped loop. The tile loop of cross-tile kernels,
// and ascending order, half-width blocks and the exponentials' wait, are written for the
// Pipelined loop alone. Without warp specialization the loads are issued by a consumer for
// its own tile: one tile per CTA. A cluster's CTAs share K/V blocks of one head's
// neighbouring query blocks (non-causal, one tile each) through their producer warpgroups;
// the half K/V block each loads starts on a 1024-byte boundary, the 128-byte swizzle's period
// of 8 rows, as block_n is a multiple of 16, and multicast loads carry no L2 hint. With one
// K/V stage the DoubleP loop (it waits for V_{j-1} before it releases V_{j-2}) and the
// ThreeStage loop under a producer warpgroup (K_{j+1} is loaded behind V_j, which waits for
// V_{j-1}'s release at the step's end) would wait for themselves.
constexpr bool fwd_config_is_valid(const FwdConfig& c) {
  const bool pipelined = c.loop == Loop::Pipelined;
  return (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256) &&
         (c.consumer_warpgroups == 2 || c.consumer_warpgroups == 3) &&
         c.block_m == 64 * c.consumer_warpgroups &&
         c.block_n >= 16 && c.block_n <= 256 && c.block_n % 16 == 0 &&
         c.stages >= 1 && c.stages <= 4 &&
         (c.stages >= 2 || !(c.double_p() || (c.three_stage() && c.warp_specialized()))) &&
         (!c.pingpong || c.overlap()) &&
         (!c.cross_tile() || pipelined) &&
         (!c.ascending || (pipelined && c.warp_specialized())) &&
         (!c.half_blocks || (pipelined && !c.exp_after_pv_wait && c.block_n % 32 == 0)) &&
         (!c.exp_after_pv_wait || pipelined) &&
         (!c.row_sum_mma || (pipelined && c.warp_specialized() && c.head_dim + 8 <= 256)) &&
         (c.warp_specialized() || !c.persistent()) &&
         (!c.dynamic_schedule || (c.persistent() && !c.causal)) &&
         (!c.q_in_registers ||
          (c.cross_tile() && c.head_dim <= 128 && c.consumer_warpgroups == 2)) &&
         (c.cluster_m == 1 || (c.cluster_m == 2 && !c.causal && !c.persistent() &&
                               c.warp_specialized() && !c.evict_last_kv)) &&
         FwdSmemLayout::of(c).total_bytes <= kFwdSmemLimit;
}

}  // namespace fa3
