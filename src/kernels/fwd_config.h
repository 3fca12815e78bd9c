// The one Config of the forward kernel family, shared by the device code (which is compiled
// once per config) and the host runtime (which parses it back out of a kernel's name).
// Every choice a forward kernel makes is a field here; nothing else changes its code.
#pragma once

#include <stdint.h>

namespace fa3 {

enum class DType : int { F16 = 0, BF16 = 1 };

struct FwdConfig {
  DType dtype = DType::BF16;
  int head_dim = 128;
  int block_m = 128;            // Br: query rows per CTA = 64 * consumer_warpgroups
  int block_n = 128;            // Bc: key rows per mainloop iteration
  int stages = 2;               // depth of the K/V circular shared-memory buffer
  int consumer_warpgroups = 2;  // one producer warpgroup + this many consumers
  bool causal = false;
  // Intra-warpgroup 2-stage GEMM-softmax pipelining (paper Algorithm 2): QK^T of block j and
  // PV of block j-1 are in flight while the softmax of block j runs.
  bool overlap = false;
  // Pingpong scheduling (paper Section 3.1, Fig. 1): named barriers give the consumer
  // warpgroups turns at issuing their GEMMs, so one's softmax runs under another's GEMMs.
  bool pingpong = false;
  // With overlap: P in two register buffers, alternating between iterations, so the loop has
  // no wait_group 0: the PV GEMM of block j-1 is waited for only after the QK^T GEMM of block
  // j+1 is issued (a wait ptxas cannot hoist into the softmax). Costs block_n/4 registers.
  bool double_p = false;
  // Persistent grid (one CTA per SM): non-causal tiles are walked round-robin; causal ones
  // are handed out longest first through a global counter, in groups of heads whose K/V fit
  // in L2. Otherwise one CTA per tile. O gets its own shared-memory tile where it fits, so
  // the next tile's Q loads while this tile's last GEMM and its epilogue run; where it does
  // not (d256), O goes over Q and the next Q loads once O's store has read it.
  bool persistent = false;
  // With overlap: 3-stage pipelining (paper Algorithm 4): QK^T of block j+1 and PV of block
  // j-1 are both in flight while the softmax of block j runs. Needs a second S and a second P
  // in registers (block_n/2 + block_n/4 more), so it only fits small key blocks.
  bool three_stage = false;
  // A producer warpgroup issues the loads and gives its registers away (paper Algorithm 1).
  // Without it (the ablation of the paper's Table 2), one consumer thread issues every TMA
  // load between its own GEMMs and every warpgroup keeps the launch's register share.
  bool warp_specialized = true;
  // With overlap: the 2-stage loop in the order of the paper's Appendix B.2 SASS. A step
  // starts with the softmax of the block whose S is complete, then issues the next QK^T,
  // rescales O while it runs and issues the PV of the softmaxed block; one wait_group 0 ends
  // the step. Without it the step issues QK^T_j and PV_{j-1} back to back and runs the
  // softmax of block j while PV_{j-1} is in flight (Algorithm 2 as written).
  bool b2_order = false;
  // A lazy row max (FlashAttention-4's trick): a row keeps its max until a block's max
  // exceeds it by more than 2^8 (P~ <= 256 then), so after the first blocks the factor
  // exp2(m_old - m_new) is exactly 1 and a warp with no grown max skips O's head_dim/2 FMULs
  // per thread (a vote and a branch). Pays at d256 (128 accumulators per thread), +0.5% at
  // d128, costs at d64 (bench/NOTES.md v7, v13).
  bool conditional_rescale = false;
  // With conditional_rescale: a block's row maxima by integers (_im), the largest int among
  // the scores' bit patterns, three at a time (VIMNMX3; a float max takes two operands on
  // sm_90): exact whenever the max is positive, which is all the lazy test needs while every
  // row of the warp keeps m >= -8 (tile::OnlineSoftmax). Half the row max's instructions,
  // and a 4-deep tree instead of 16-deep chains before the exponentials.
  bool int_max = false;
  // CTAs per thread-block cluster (1 or 2). The 2 CTAs of a cluster compute neighbouring
  // query blocks of one head, so they read the same K and V: each loads half of every K/V
  // block (block_n/2 rows) and TMA multicasts it into both CTAs' shared memory, halving the
  // L2 traffic of K/V. A stage is refilled once both CTAs released it. Non-causal only (the
  // two blocks would need different key ranges) and not persistent.
  int cluster_m = 1;
  // Key blocks in ascending order (0 first, the causal diagonal and the seqlen_k tail last)
  // instead of descending. CTAs that start together on query blocks of one head then read
  // the same K/V block at about the same moment, as non-causal CTAs do; descending, causal
  // CTAs start at their own diagonals and never ask for the same block at once. Loops of
  // the default pipelined form only (overlap, warp specialization, no double_p, three_stage
  // or b2_order).
  bool ascending = false;
  // With overlap (the plain pipelined loop): the exponentials of a step wait for its PV GEMM
  // (their base is made to depend on an O accumulator read after the wait), so only the row
  // max runs under it. ptxas otherwise places that wait where it likes: after the row max in
  // most kernels, after the first exponentials in some (d128 n128 persistent, the 2-CTA
  // ones), which then contend for MUFU with the other warpgroup's softmax that pingpong put
  // under this warpgroup's GEMMs (bench/NOTES.md v9).
  bool exp_after_pv_wait = false;
  // Persistent, pipelined: a tile's last PV GEMM is issued in one turn with the next tile's
  // first QK^T, and the tile's epilogue runs under the next tile's first softmax, so the
  // tensor cores see no tile boundary. Needs the next Q before this tile's last PV: Q is
  // double-buffered, and O goes over the Q buffer of its own tile.
  bool cross_tile = false;
  // With cross_tile: a second producer warp loads Q (and, for the dynamic scheduler, draws
  // the tiles), each tile's as soon as its buffer frees, instead of the K/V thread after
  // the previous tile's last K/V load; short tiles then find their Q loaded.
  bool q_warp = false;
  // With q_warp: three Q buffers instead of two (_q3). The Q buffer of tile k, where tile k's
  // O is staged for its TMA store, is then needed again by tile k+3, not k+2: the thread that
  // issued the store hands it back in tile k+1's epilogue, when the store has long read it,
  // and nobody waits for the read. With two buffers every consumer warp waits at the end of
  // each epilogue for that read (and the next Q is late behind it): at d64 causal 1k the two
  // waits took ~5% of the warp samples (bench/NOTES.md v15).
  bool three_q_buffers = false;
  // With q_warp (two Q buffers): the Q warp also stores each tile's O (_os). The consumers
  // write their O rows over the tile's Q buffer and arrive on its q_empty barrier, nothing
  // more: the Q warp issues the TMA store as soon as all have, and waits for the store to
  // read the buffer before the buffer's next Q. Otherwise a consumer thread stores its
  // warpgroup's O and the warpgroup waits, at a named barrier, for the store to read it
  // before handing the buffer back (the wait _q3 moves a tile later, which the d128 _ls
  // kernels have no shared memory for).
  bool q_warp_stores_o = false;
  // Persistent, non-causal: tiles handed out through the launch's counter, in the static
  // walk's order, as causal persistent kernels always are (they also reorder them), instead of
  // CTA i taking tiles i, i + grid, ... A CTA that runs slower takes fewer tiles, and the tiles
  // in flight stay a window of consecutive ones (one or two heads' K/V) instead of drifting
  // apart over the launch (bench/NOTES.md v17).
  bool dynamic_schedule = false;
  // With the plain pipelined loop: a consumer warpgroup for which every key in the upper
  // half of a block is masked (the causal diagonal's upper-right quadrant when block_m =
  // block_n, the seqlen_k tail) computes that block's QK^T (N = block_n/2) and softmax at
  // half width, and its PV too where the step that issues it is unmasked. Measured +0.7-1.5%
  // for d128 persistent causal at 512-2k, nothing for the cross-tile one (bench/NOTES.md v13).
  bool half_blocks = false;
  // The softmax row sums l by the tensor cores: every V stage carries a 128-byte column chunk
  // of ones after its head_dim columns, and the PV GEMM is N = head_dim + 8 wide, so its 8
  // extra columns (4 more accumulators per thread after O) each get P's row sums, instead of
  // block_n/2 FADDs per thread and key block (the loop is issue-bound). l then sums P as the
  // GEMM reads it, rounded to 16 bits, like O. Costs a chunk (block_n x 128 bytes) of shared
  // memory per V stage and 1/16 more PV work: +0.6-1.9% at d128 non-causal, +0.1-0.7% causal
  // (bench/NOTES.md v14). Eight separate m64n8k16 wgmmas instead cost 5-9%.
  bool row_sum_mma = false;
  // With cross_tile: the QK^T GEMM takes Q from registers (RS-wgmma) instead of shared memory
  // (_qr). Each consumer thread loads its warpgroup's Q fragments once per tile (head_dim/4
  // registers), so the key blocks of the tile read only K from shared memory: a fifth less
  // shared-memory traffic per block at d128 (Q 16 KB of each warpgroup's 48 KB for QK^T,
  // 34 KB for PV), whose energy counts at the power cap. Two consumer warpgroups only: with
  // three (160 registers each) the d64 kernel spilled and ptxas serialized its wgmmas.
  bool q_in_registers = false;
  // L2 eviction priorities on the TMA copies (createpolicy): Q loads and O stores
  // evict-first (_ef), as each byte is used once and would otherwise push K and V, which
  // every query block of a head reads again, out of L2; K and V loads evict-last (_el).
  bool evict_first_q_o = false;
  bool evict_last_kv = false;

  // Register split for setmaxnreg (paper Algorithm 1 lines 3 and 12). The sum over
  // warpgroups of 128 * regs must stay within the 64K-register file.
  // Without warp specialization there is no split: 0 for both.
  constexpr int producer_regs() const {
    return !warp_specialized ? 0 : consumer_warpgroups == 2 ? 24 : 32;
  }
  constexpr int consumer_regs() const {
    return !warp_specialized ? 0 : consumer_warpgroups == 2 ? 240 : 160;
  }
  constexpr int threads() const { return 128 * ((warp_specialized ? 1 : 0) + consumer_warpgroups); }
  // Tiles handed out through the launch's tile counter (the runtime allocates one per stream):
  // causal persistent kernels always, non-causal persistent ones with dynamic_schedule.
  constexpr bool draws_tiles() const { return persistent && (causal || dynamic_schedule); }
};

// Shared-memory plan of a forward CTA, in bytes from a 1024-byte aligned base. Every tile
// is stored as head_dim/64 column chunks of rows x 128 bytes with the 128-byte swizzle,
// the layout both TMA (SWIZZLE_128B) and the wgmma descriptors use.
// Shared memory a forward CTA may use: 227 KB per block, less the kernel's own 1 KB of static
// shared memory (the aligned extern declaration).
constexpr uint32_t kFwdSmemLimit = 227u * 1024u - 1024u;

// The dynamic scheduler's tile slots: per Q buffer, the tile and its decoded (query block,
// head, batch), four 32-bit words (fwd.cuh, tile_record).
constexpr uint32_t fwd_tile_slot_bytes(uint32_t q_buffers) { return 16u * q_buffers; }

struct FwdSmemLayout {
  uint32_t q_offset, q_bytes;            // Q_i (cross_tile: two buffers, q_bytes apart)
  uint32_t q_buffers;
  uint32_t o_offset;                     // O_i (q_bytes): over Q_i, or (persistent, where it
                                         // fits) its own tile
  uint32_t k_offset, kv_stage_bytes;     // K stages, then V stages
  uint32_t v_offset, v_stage_bytes;      // row_sum_mma: a V stage + one chunk of ones
  uint32_t barrier_offset;               // mbarriers: q_full[q_buffers], q_empty[q_buffers],
                                         // k_full[s], k_empty[s], v_full[s], v_empty[s]; then
                                         // the index of the tile in each Q buffer;
                                         // q_warp: tile_ready[q_buffers], draw_go
  uint32_t total_bytes;                  // including the slack to align the base to 1024

  static constexpr FwdSmemLayout of(const FwdConfig& c) {
    FwdSmemLayout l{};
    l.q_offset = 0;
    l.q_bytes = static_cast<uint32_t>(c.block_m * c.head_dim * 2);
    l.q_buffers = c.cross_tile ? (c.three_q_buffers ? 3 : 2) : 1;
    l.kv_stage_bytes = static_cast<uint32_t>(c.block_n * c.head_dim * 2);
    l.k_offset = l.q_offset + l.q_bytes * l.q_buffers;
    l.v_offset = l.k_offset + l.kv_stage_bytes * c.stages;
    l.v_stage_bytes = l.kv_stage_bytes + (c.row_sum_mma ? static_cast<uint32_t>(c.block_n * 128) : 0u);
    const uint32_t kv_end = l.v_offset + l.v_stage_bytes * c.stages;
    // The tile slots (16 bytes per Q buffer, 16-byte aligned after the barriers before
    // them); q_warp adds a tile_ready barrier per Q buffer and draw_go (fwd.cuh, FwdSmem).
    const uint32_t barrier_bytes = 8u * (2 * l.q_buffers + 4 * c.stages) +
                                   fwd_tile_slot_bytes(l.q_buffers) +
                                   (c.q_warp ? 8u * l.q_buffers + 8u : 0u);
    const uint32_t slack = 1024;  // to align the base to 1024
    const bool own_o = c.persistent && !c.cross_tile &&
                       kv_end + l.q_bytes + barrier_bytes + slack <= kFwdSmemLimit;
    l.o_offset = own_o ? kv_end : l.q_offset;
    l.barrier_offset = own_o ? l.o_offset + l.q_bytes : kv_end;
    l.total_bytes = l.barrier_offset + barrier_bytes + slack;
    return l;
  }
  constexpr bool o_over_q() const { return o_offset == q_offset; }
};

// The configs a kernel may be built with: the constraints the kernel code relies on.
// Pingpong orders whole GEMM pairs of the pipelined loop, and double_p, three_stage and
// b2_order are forms of that loop, so all need overlap; ascending is written for the plain
// form of it, and so is cross_tile, which also needs a tile loop (persistent). Without warp
// specialization the loads are issued by a consumer for its own tile: one tile per CTA, not
// persistent. A cluster's CTAs load through their producer warpgroups; the half K/V block
// each loads starts on a 1024-byte boundary, the 128-byte swizzle's period of 8 rows, as
// block_n is a multiple of 16.
constexpr bool fwd_config_is_valid(const FwdConfig& c) {
  return (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256) &&
         (c.consumer_warpgroups == 2 || c.consumer_warpgroups == 3) &&
         c.block_m == 64 * c.consumer_warpgroups &&
         c.block_n >= 16 && c.block_n <= 256 && c.block_n % 16 == 0 &&
         c.stages >= 1 && c.stages <= 4 && (!c.pingpong || c.overlap) &&
         (!c.double_p || c.overlap) && (!c.three_stage || (c.overlap && !c.double_p)) &&
         (!c.b2_order || (c.overlap && !c.double_p && !c.three_stage)) &&
         (c.warp_specialized || !c.persistent) &&
         (c.cluster_m == 1 ||
          (c.cluster_m == 2 && !c.causal && !c.persistent && c.warp_specialized)) &&
         (!c.ascending || (c.overlap && c.warp_specialized && !c.double_p && !c.three_stage &&
                           !c.b2_order)) &&
         (!c.exp_after_pv_wait || (c.overlap && !c.double_p && !c.three_stage && !c.b2_order)) &&
         (!c.cross_tile || (c.persistent && c.overlap && !c.double_p && !c.three_stage &&
                            !c.b2_order)) &&
         (!c.q_warp || c.cross_tile) && (!c.three_q_buffers || c.q_warp) &&
         (!c.q_warp_stores_o || (c.q_warp && !c.three_q_buffers)) &&
         (!c.dynamic_schedule || (c.persistent && !c.causal)) &&
         (!c.half_blocks || (c.overlap && !c.double_p && !c.three_stage && !c.b2_order &&
                             !c.exp_after_pv_wait && c.block_n % 32 == 0)) &&
         (!c.row_sum_mma || c.head_dim + 8 <= 256) &&  // the widest wgmma is N = 256
         (!c.int_max || c.conditional_rescale) &&
         (!c.evict_last_kv || c.cluster_m == 1) &&     // multicast K/V loads carry no hint
         (!c.q_in_registers ||
          (c.cross_tile && c.head_dim <= 128 && c.consumer_warpgroups == 2)) &&
         FwdSmemLayout::of(c).total_bytes <= kFwdSmemLimit;
}

}  // namespace fa3
