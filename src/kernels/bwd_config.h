// The Config of the backward kernel family (paper Algorithm 3), shared by the device code and
// the host runtime, with its name grammar:
//
//   fa3_bwd_<dtype>_d<head_dim>_m<block_m>_n<block_n>_s<stages>_w<consumer warpgroups>[_kvh|_kvt][_dqh|_dqq|_dqt][_rw][_fs][_p32][_pt][_causal]
//
// One CTA owns block_n keys of one (batch, K/V head): it loads K_j and V_j once, keeps dK_j
// and dV_j in registers, and streams the block_m-row blocks Q_i, dO_i (with LSE_i and D_i) of
// every query head of the K/V head's group through a `stages`-deep pipeline. Each consumer
// warpgroup owns 64 of the keys for S, dP, dK and dV; or, with _kvh (KvSplit::HeadDim, for
// head dims whose 64-key dK and dV do not fit one warpgroup's registers: 256), the
// warpgroups share 64 keys: each computes S^T and dP^T for half of the queries, P^T and dS^T
// go to shared memory, and each accumulates dK and dV (SS GEMMs) for half of the head dim.
// _kvt (KvSplit::Transposed, head dim 256 with 80 keys, as the public FA3): the head-dim split
// of _kvh with dK^T and dV^T accumulated (the head dim as the wgmma M, all block_n keys as N, so
// that block_n need not be a multiple of 64): S and dP are not transposed (64 queries x
// block_n / 2 keys a warpgroup), P^T and dS^T go to shared memory, dQ_i is computed and staged
// in 64-column pieces that circulate through a ring of dq_slots() buffers (its own 64 KB
// would not fit next to 80-row K_j and V_j).
// dQ_i = dS K_j is split between the
// warpgroups (DqSplit) by keys (each computes the whole dQ_i over its 64 keys: two fp32
// partial sums go to the accumulator per step), or from the whole dS^T in shared memory (a
// barrier between the warpgroups per step, one sum per step: half the reduce-add traffic) by
// head dim (_dqh: head_dim / 2 columns each) or by queries (_dqq: block_m / 2 rows each); or
// by head dim with dQ_i^T = K_j^T dS^T computed (_dqt: head_dim / 2 rows of dQ_i^T each, all
// block_m queries as the wgmma N, so that block_m may be 80 as in the public FA3's d128
// kernel; dS is stored queries x keys). Each warpgroup stages its part in fragment order
// (tile::AccStagingTile) and the dQ writer adds it with one plain bulk reduce-add: the
// workspace's dQ accumulator keeps each query block as block_m / 64 bands of 64 rows x
// head_dim in tile::AccFragmentOrder (DqAccumLayout; _dqt: head_dim / 64 runs of dQ_i^T's 64
// rows x block_m).
// _rw (BwdConfig::rotated_walk, non-causal only): the CTA of K/V block n starts its walk of the
// query blocks at n * M / N (M query blocks, N K/V blocks) and wraps around, so that a pair's
// CTAs, which run together, do not reduce-add into one query block at the same time (without
// ordered adds; d64 +1%, d128 and d256 level: docs/perf-history.md v33b, v33d). Causal walks
// are staggered already: each K/V block starts at its diagonal.
// _fs (BwdConfig::first_store, causal or _rw only): without ordered adds, the CTA that reaches
// a query block first (a ticket: the block's counter in the workspace) stores its dQ parts
// and the others add once that store is complete, so the preprocess zeroes only the
// accumulator blocks no CTA reaches instead of all of it (134 MB at every size of the
// paper's grid): d128 and d256 causal and d64 _rw +2-9% at 1k-2k, +1-4% at 4k, level from 8k
// (an H200, v37). Where a pair's CTAs walk the query blocks in step (non-causal without _rw)
// they reach each block together and all but one would wait for its store (d128 and d256
// non-causal lost up to 5%); with _rw there (whose walk alone lost ~1% at d128) it is +1-5% to
// 4k (_dqt_rw_fs_pt, _kvt_dqh_rw_fs: v37e, v37f). At d64 causal _pt it did not pay
// (0.97-1.02), and ptxas spills in that kernel's consumers with it.
// _p32 (BwdConfig::producer_regs_32): setmaxnreg gives the producer warpgroup 32 registers a
// thread and the consumers 232, not 24 and 240; ptxas then schedules the consumers' step
// differently (d128 causal: +1-2% from 2k on an H200 and an H100, docs/perf-history.md v28l).
// _pt (BwdConfig::persistent): one CTA per SM walks tiles (K/V blocks) drawn from a counter in
// the workspace: the first blockIdx.x (with ordered adds drawn too, in the order of the draws:
// bwd_first_tile), each next one drawn by the producer once it has issued
// the last one's loads, so that the long causal tiles even out as the hardware's dispatch of
// one CTA a tile does. A tile's end does not wait for its dK_j and dV_j to leave: each
// warpgroup stages its 64 keys of them in its dQ buffer (one more use of the buffer: it must
// hold dK_j's, 16 KB at head dim 64 and 128; dV_j's go there too at 64, in a buffer of their
// own at 128 with _dqh, 32 KB in all, and in its dS^T stage with _dqt, where no shared memory
// is left) and a warp of the producer warpgroup stores them by TMA while the next tile's K_j
// and V_j (loaded as soon as the last step's GEMMs have read them; at d64 K_j during the tile
// before and V_j after its last dP^T, k_double_buffered) and first steps run; the
// CTA's start (launch, barrier set-up) is paid once per SM, not once per tile (v28h: 1.6 steps
// a CTA at d64, 16% of the time at causal 2k). The picks for d64 causal (+1-3% from 1k to 4k,
// v34; level or ahead from 12k since v46f, v47b), d128 causal (below 6144 since v44b, at every
// length since v90b': +0.9% at 8k-16k against the one-tile _p32) and d128 non-causal from 1024
// (+1%, v36); d64 non-causal it is 3-8% slower (docs/perf-history.md
// v34). The grid takes every SM (at most sm_count CTAs): the postprocess follows it.
// A cubin holds three kernels: the name's (the main loop), and
// <name>_pre (D = rowsum(dO * O), the dQ accumulator zeroed where no first writer stores)
// and <name>_post (dQ to the dtype, scaled); where causal_last_first, a fourth, <name>_lf
// (bwd.cu).
#pragma once

#include <stdint.h>

#include "kernels/fwd_config.h"
#include "kernels/fwd_names.h"

namespace fa3 {

// How the consumer warpgroups share the dQ_i = dS K_j GEMM of a step. HeadDimT: by head dim,
// computed transposed (dQ_i^T = K_j^T dS^T: the head dim as the wgmma M, the block_m queries as
// N), so that block_m need not be a multiple of 64 (_dqt: 80-row query blocks at head dim 128,
// as the public FA3's non-causal kernel).
enum class DqSplit { Keys, HeadDim, Queries, HeadDimT };

// How the consumer warpgroups share dK_j and dV_j: 64 keys each (all head-dim columns), or
// all block_n keys, head_dim / warpgroups columns each (_kvh; _kvt with dK^T and dV^T).
enum class KvSplit { Keys, HeadDim, Transposed };

struct BwdConfig {
  DType dtype = DType::BF16;
  int head_dim = 128;
  int block_m = 64;             // query rows per step (Br)
  int block_n = 128;            // keys per tile (Bc): 64 * consumer_warpgroups (_kvh 64, _kvt 80)
  int stages = 2;               // depth of the Q / dO pipeline
  int consumer_warpgroups = 2;  // one producer warpgroup + these
  DqSplit dq_split = DqSplit::Keys;
  KvSplit kv_split = KvSplit::Keys;
  bool rotated_walk = false;      // _rw: non-causal walks start at the CTA's share of the blocks
  bool first_store = false;       // _fs: a query block's first writer stores its dQ parts
  bool producer_regs_32 = false;  // _p32: setmaxnreg 32 / 232 (two consumer warpgroups)
  bool persistent = false;        // _pt: a CTA per SM, tiles drawn from a counter
  bool causal = false;
  // Not in the name: the cubin's <name>_lf entry, the main kernel for causal calls whose
  // ordered dQ adds go the last K/V block's first (causal_last_first).
  bool last_first = false;

  // Whether the warpgroups share the keys and split the head dim of dK_j and dV_j (_kvh,
  // _kvt), and whether they hold them transposed (_kvt).
  constexpr bool kv_split_head_dim() const { return kv_split != KvSplit::Keys; }
  constexpr bool kv_transposed() const { return kv_split == KvSplit::Transposed; }
  // The head-dim columns of dK_j and dV_j one warpgroup accumulates, and the query columns of
  // S^T and dP^T it computes (_kvt: the key columns of S and dP).
  constexpr int kv_cols() const { return kv_split_head_dim() ? head_dim / consumer_warpgroups : head_dim; }
  constexpr int s_cols() const {
    return kv_transposed() ? block_n / consumer_warpgroups
           : kv_split_head_dim() ? block_m / consumer_warpgroups : block_m;
  }
  // Rows of a TMA box of K_j, V_j, dK_j and dV_j: 64 (a block of 128 keys is two boxes), or
  // _kvt's whole 80-key block.
  constexpr int kv_box_rows() const { return kv_transposed() ? block_n : 64; }
  // Rows of a TMA box of Q_i and dO_i: 64 (a 128-row block is two boxes), or a whole 80-row
  // block.
  constexpr int q_box_rows() const { return block_m % 64 == 0 ? 64 : block_m; }

  // Whether a warpgroup's dQ GEMM reads the other's dS^T rows.
  constexpr bool dq_shared_ds() const { return dq_split != DqSplit::Keys; }
  constexpr bool dq_transposed() const { return dq_split == DqSplit::HeadDimT; }
  // dS^T tiles in flight: when the dQ GEMMs read both warpgroups' rows, a warpgroup writes
  // the next step's while the other may still read this step's. _kvt has room for one: a
  // warpgroup waits for the other's reads of the last step's before it writes its rows.
  constexpr int ds_stages() const { return dq_shared_ds() && !kv_transposed() ? 2 : 1; }
  // The rows and columns of a warpgroup's dQ accumulator (its part of dQ_i; _dqt: of dQ_i^T,
  // head-dim rows x query columns).
  constexpr int dq_rows() const {
    return dq_split == DqSplit::Queries    ? block_m / consumer_warpgroups
           : dq_split == DqSplit::HeadDimT ? head_dim / consumer_warpgroups
                                           : block_m;
  }
  constexpr int dq_cols() const {
    return dq_split == DqSplit::HeadDim    ? head_dim / consumer_warpgroups
           : dq_split == DqSplit::HeadDimT ? block_m
                                           : head_dim;
  }
  // How a step's dQ_i parts reach the dQ writer: dq_pieces() pieces of 64 rows x
  // dq_piece_cols() in a ring of dq_slots() staging buffers: piece p of step t, the ring's
  // entry dq_pieces() t + p, is warpgroup p % consumer_warpgroups's (p / consumer_warpgroups)-th.
  // A warpgroup's part is one piece with a buffer of its own; _kvt's is two 64-column pieces,
  // four a step in three buffers.
  constexpr int dq_piece_cols() const { return kv_transposed() ? 64 : dq_cols(); }
  constexpr int dq_pieces() const { return consumer_warpgroups * (dq_cols() / dq_piece_cols()); }
  constexpr int dq_slots() const { return kv_transposed() ? 3 : consumer_warpgroups; }
  // Whether the dQ pieces share a ring of buffers (_kvt: more pieces than buffers), not a
  // buffer each.
  constexpr bool dq_ring() const { return dq_slots() != dq_pieces(); }
  // Whether the cubin has a <name>_lf entry (last_first), for causal calls with ordered adds
  // (backward_add_order), which go the last K/V block's first (kOrderedLastFirst; bwd_kernel.cuh,
  // BwdWork::add_rank): the kernels whose query blocks are as tall as their K/V blocks, the
  // d64 picks (128 and 128; in the lab also d256 _kvh, 64 and 64). Measured against the
  // descending walk in K/V block order (docs/perf-history.md v39): d64 causal 1.02-1.09x from
  // 2k, but d128 causal (64-row query blocks) 0.92-0.96x, which keep it; _kvt's ring of dQ
  // buffers leaves its dQ writer no register for it at 24 (every form tried spilled 4-40
  // bytes). An entry of its own, as any change to the main kernel's code moves ptxas's
  // schedule of the default mode's step (the single-entry form ran d64 causal 1-1.5% slower).
  constexpr bool causal_last_first() const {
    return causal && !dq_ring() && block_m == block_n;
  }
  // Whether the dQ writer, with ordered adds, awaits the next step's turn while this step's
  // adds complete (bwd_dq_adder), not once this step is published: the poll's round trip to
  // L2 then leaves the writer's path from a staged piece to its add (a diagnostic build
  // without the waits ran the deterministic mode 6-8% faster at d128 causal; one that
  // published a step once its adds had read shared memory, not once they completed, no
  // faster). Measured (docs/perf-history.md v40): non-causal deterministic calls d64 +1-3%,
  // d256 +5-10%; causal ones lost 3-11%, as the descending walk in K/V block order queues a
  // pair's CTAs at each query block, so that a CTA awaiting its next turn before it publishes
  // holds up the CTA behind it; d128's default mode lost 1-3% (ptxas's schedule of the step
  // moved), where its deterministic mode gained too little to pay for it.
  constexpr bool dq_turn_early() const { return !causal && head_dim != 128; }
  // Whether a consumer warpgroup publishes its staged dQ part (the proxy fence and its dq_full
  // arrival) in the next step, once that step's S^T and dP^T GEMMs are issued, rather than
  // right after its stores: the fence then finds the stores drained instead of waiting for
  // them while dK's GEMM runs (its long-scoreboard stall, with the arrival's, was ~11% of the
  // d64 causal loop's samples under ncu at 16k). Measured (docs/perf-history.md v46f): d64
  // causal _pt +2% at 2k-8k; d64 non-causal -1..-3%, d128 -1..-12%, d256 level: only there.
  // Not in the _lf entry (ordered adds, mostly deterministic): they wait for each
  // publication, and with the late one it lost ~5%; without it, +2-5% (v47a). A tile's last
  // part goes at once, in its own step: the warpgroup stages dK_j in that buffer at the
  // tile's end, once the dQ writer has taken it (v53d: +0.5% at 4k, an H100).
  constexpr bool dq_publish_next_step() const {
    return causal && persistent && dq_split == DqSplit::Queries && !last_first;
  }
  // _pt: whether K_j has two buffers, so that a tile's K_j loads while the tile before runs
  // (its buffer free once the tile two before has ended) and its V_j once the tile before has
  // read its own (after that tile's last dP^T GEMM), not both once the tile before has ended:
  // the tile boundary's K/V arrival (v28h: ~0.46 step a tile) off the consumers' path. The
  // d64 kernels (_dqq), whose 16 KB K_j fits beside the rest; at d128 no 32 KB is left.
  // Measured (docs/perf-history.md v53a, against one buffer): d64 causal +2.7-3.0% at 2k,
  // +1.0% at 4k, +0.4-0.8% at 8k, 16k within its spread (an H100); +2.2-2.6%, +1.0-1.2%,
  // +1.0-1.7% (an H200).
  constexpr bool k_double_buffered() const {
    return persistent && dq_split == DqSplit::Queries;
  }
  // _pt with one K_j buffer (head dim 128): V_j and K_j each given to the next tile's loads
  // once the tile's last GEMM to read it has completed (V_j: its last dP^T; K_j: its last dQ
  // GEMM), instead of both once the tile has ended, with the next tile's first Q_i and dO_i
  // queued behind them: of what k_double_buffered hides, the part of the last step after
  // those GEMMs (the dK GEMM, the dK_j / dV_j staging). Measured (docs/perf-history.md v54a,
  // an H200, against both at the tile's end): d128 causal +2.2% at 1k, +1.8% at 2k, +1.1-1.3%
  // at 4k; d128 non-causal level (its tiles are 13-200 steps long).
  constexpr bool kv_released_apart() const { return persistent && !k_double_buffered(); }
  // _pt, non-causal (every tile as long): whether the grid's CTAs share the last, partial
  // wave's tiles instead of taking them whole (the runtime's backward_split_plan, bwd_piece_at
  // below; calls without ordered adds only). The paper grid gives d128 2048 tiles on 132 SMs,
  // 15.52 waves, and shapes that filled the 16th ran 1.8-2.0% more TFLOPS on an H200
  // (docs/perf-history.md v88a'): the last wave's half-idle SMs.
  constexpr bool splits_last_wave() const { return persistent && !causal; }
  // Whether Q_i and dO_i have barriers of their own (full and empty), so that S^T's GEMM
  // starts once Q_i is in, while dO_i still loads, and Q_i is released once dK's GEMM (its
  // last reader) completes, before dV's: with one stage (head dim 256) the next step's loads
  // start only when this step's GEMMs release the stage.
  constexpr bool split_qdo_barriers() const { return stages == 1; }
  // A CTA gets 168 registers a thread at launch (384 threads: two consumer warpgroups, the
  // only count bwd_config_is_valid takes): what the producer gives up, the consumers get
  // (24 -> 240, 32 -> 232).
  constexpr int producer_regs() const { return producer_regs_32 ? 32 : 24; }
  constexpr int consumer_regs() const { return producer_regs_32 ? 232 : 240; }
  constexpr int threads() const { return 128 * (1 + consumer_warpgroups); }
  // _pt: whether a warpgroup's 64 keys of dK_j (16-bit, 64-row TMA boxes) fit its dQ staging
  // buffer, where a persistent CTA stages them for their TMA store; and whether dV_j's fit
  // there too (head dim 64, _dqq), or take a buffer of their own (head dim 128, _dqh).
  constexpr bool dk_fits_dq_buffer() const {
    return !kv_split_head_dim() && dq_slots() == consumer_warpgroups &&
           dq_rows() * dq_piece_cols() * 4 >= 64 * head_dim * 2;
  }
  constexpr bool dkv_fit_dq_buffer() const {
    return dk_fits_dq_buffer() && dq_rows() * dq_piece_cols() * 4 >= 2 * 64 * head_dim * 2;
  }
  // _pt where dV_j's rows do not fit the dQ buffers: with _dqt (no shared memory left) warpgroup
  // wg stages them in dS^T stage wg, once both warpgroups' last dQ GEMMs of the tile have read
  // it; otherwise in buffers of their own, of these bytes.
  constexpr bool dv_staged_in_ds() const {
    return persistent && !dkv_fit_dq_buffer() && dq_transposed();
  }
  constexpr int dv_staging_bytes() const {
    return persistent && !dkv_fit_dq_buffer() && !dv_staged_in_ds()
               ? consumer_warpgroups * 64 * head_dim * 2
               : 0;
  }
};

// Shared memory a backward CTA may use: 227 KB per block (the main kernel declares no static
// shared memory, only the aligned extern array; BwdSmemLayout's total keeps 1 KB of slack
// to align its base).
constexpr uint32_t kBwdSmemLimit = 227u * 1024u;

// Threads of a CTA of the preprocess (_pre) and the postprocess (_post) kernels.
constexpr int kBwdAuxThreads = 128;

// Shared-memory plan of a backward CTA, in bytes from a 1024-byte aligned base. 16-bit tiles
// are head_dim/64 column chunks of rows x 128 bytes with the 128-byte swizzle (TMA and wgmma).
struct BwdSmemLayout {
  // K_j (k_double_buffered: two, the second at k_offset + kv_bytes) and V_j: block_n x head_dim
  uint32_t k_offset, v_offset, kv_bytes;
  uint32_t q_offset, do_offset, qdo_stage_bytes;  // Q_i and dO_i stages
  uint32_t stats_offset, stats_stage_bytes;       // per stage: LSE_i * log2(e), then D_i
  uint32_t ds_offset, ds_bytes;  // per ds stage: dS^T, block_n keys x block_m (_dqt: dS)
  uint32_t p_offset;             // _kvh, _kvt, per ds stage: P^T, as dS^T
  uint32_t dq_offset, dq_bytes;  // per dq slot: a dQ piece, fp32, fragment order
  uint32_t dv_offset;  // _pt where dV_j does not fit the dQ buffers: a warpgroup's 64 rows each
  uint32_t barrier_offset;
  uint32_t total_bytes;

  static constexpr uint32_t barrier_count(const BwdConfig& c) {
    // kv_full; full[s] (Q_i, LSE_i; unsplit also dO_i, D_i), empty[s] (the same);
    // dq_full[slot], dq_empty[slot]; split_qdo_barriers: do_full[s], do_empty[s]; _pt:
    // kv_empty, tile_full[2], tile_empty[2], dkv_full[warpgroup], and 32 bytes for the two
    // tile slots, three roles' carries and the first tile with ordered adds (4 bytes each, at
    // +0, +4, +8..+16 and +24; +20 unused); dV_j staged in
    // the dS^T stages: dv_read (its place kept in every _pt kernel); after it,
    // k_double_buffered: k_full[2], k_empty[2]; kv_released_apart: k_empty
    return 1u + 2u * c.stages + 2u * static_cast<uint32_t>(c.dq_slots()) +
           (c.split_qdo_barriers() ? 2u * static_cast<uint32_t>(c.stages) : 0u) +
           (c.persistent ? 5u + static_cast<uint32_t>(c.consumer_warpgroups) + 4u : 0u) +
           (c.persistent ? 1u : 0u) +
           (c.k_double_buffered() ? 4u : c.kv_released_apart() ? 1u : 0u);
  }

  static constexpr BwdSmemLayout of(const BwdConfig& c) {
    BwdSmemLayout l{};
    l.kv_bytes = static_cast<uint32_t>(c.block_n * c.head_dim * 2);
    l.k_offset = 0;
    l.v_offset = l.k_offset + l.kv_bytes * (c.k_double_buffered() ? 2u : 1u);
    l.qdo_stage_bytes = static_cast<uint32_t>(c.block_m * c.head_dim * 2);
    l.q_offset = l.v_offset + l.kv_bytes;
    l.do_offset = l.q_offset + l.qdo_stage_bytes * c.stages;
    l.ds_bytes = static_cast<uint32_t>(c.block_n * c.block_m * 2);
    l.ds_offset = l.do_offset + l.qdo_stage_bytes * c.stages;
    l.dq_bytes = static_cast<uint32_t>(c.dq_rows() * c.dq_piece_cols() * 4);
    l.p_offset = l.ds_offset + l.ds_bytes * c.ds_stages();
    l.dq_offset = l.p_offset + (c.kv_split_head_dim() ? l.ds_bytes * c.ds_stages() : 0u);
    l.stats_stage_bytes = static_cast<uint32_t>(2 * c.block_m * 4);
    l.dv_offset = l.dq_offset + l.dq_bytes * c.dq_slots();
    l.stats_offset = l.dv_offset + static_cast<uint32_t>(c.dv_staging_bytes());
    l.barrier_offset = l.stats_offset + l.stats_stage_bytes * c.stages;
    l.total_bytes = l.barrier_offset + 8u * barrier_count(c) + 1024u;  // + alignment slack
    return l;
  }
};

// The configs the backward kernel is written for, two consumer warpgroups and a warpgroup's
// dQ part one wgmma M of 64 rows (the key and head-dim splits take 64-row query blocks, the
// query split 64 rows a warpgroup):
//   64 keys a warpgroup: head dims 64 and 128 (dK and dV of 64 keys by head_dim stay in one
//     warpgroup's registers), query blocks of 64 or 128 rows (the N of the S^T GEMM), the
//     head-dim split of dQ one 64-column chunk a warpgroup;
//   _kvh: head dim 256, 64 keys and 64 queries (S^T of 64 x 32 a warpgroup), dQ split by head
//     dim (128 columns a warpgroup, as dK and dV);
//   _kvt: head dim 256, 80 keys and 64 queries (S of 64 x 40 a warpgroup), one Q / dO stage,
//     dQ split by head dim.
constexpr bool bwd_config_is_valid(const BwdConfig& c) {
  const bool shape_ok =
      c.kv_transposed()
          ? c.head_dim == 256 && c.block_m == 64 && c.block_n == 80 && c.stages == 1 &&
                c.dq_split == DqSplit::HeadDim
      : c.kv_split_head_dim()
          ? c.head_dim == 256 && c.block_m == 64 && c.block_n == 64 && c.dq_split == DqSplit::HeadDim
      : c.dq_transposed()
          ? c.head_dim == 128 && (c.block_m == 64 || c.block_m == 80) &&
                c.block_n == 64 * c.consumer_warpgroups
          : (c.head_dim == 64 || c.head_dim == 128) && (c.block_m == 64 || c.block_m == 128) &&
                c.block_n == 64 * c.consumer_warpgroups &&
                (c.dq_split != DqSplit::HeadDim || c.dq_cols() == 64);
  // setmaxnreg only moves registers within the CTA's launch allocation (65536 / threads, in
  // multiples of 8, a thread): a count over it would make the consumers' increase wait forever.
  const int launch_regs = 65536 / c.threads() / 8 * 8;
  const bool regs_ok = 128 * c.producer_regs() + 128 * c.consumer_warpgroups * c.consumer_regs() <=
                       launch_regs * c.threads();
  return shape_ok && regs_ok && !(c.rotated_walk && c.causal) &&
         (!c.last_first || c.causal_last_first()) &&
         (!c.first_store || c.causal || c.rotated_walk) && c.consumer_warpgroups == 2 &&
         // _pt: the forms built, tested and measured (v34, v36): the query split of dQ (head
         // dim 64), the head-dim split with the causal mask or _dqt's (128), two stages.
         (!c.persistent ||
          (c.dk_fits_dq_buffer() && c.stages == 2 &&
           (c.dq_split == DqSplit::Queries || c.dq_split == DqSplit::HeadDimT ||
            (c.dq_split == DqSplit::HeadDim && c.causal)) &&
           (!c.dv_staged_in_ds() ||
            (c.ds_stages() == c.consumer_warpgroups && c.block_n * c.block_m >= 64 * c.head_dim)))) &&
         c.stages >= 1 && c.stages <= 3 &&
         // One stage splits Q_i and dO_i onto barriers of their own (split_qdo_barriers),
         // whose dO_i release only the _kvh and _kvt consumers make: elsewhere the producer's
         // second step would wait for it forever.
         (c.stages >= 2 || c.kv_split_head_dim() || c.kv_transposed()) &&
         c.dq_rows() == 64 && BwdSmemLayout::of(c).total_bytes <= kBwdSmemLimit;
}

// Where a query block's dQ sits in the workspace's fp32 accumulator (per (batch, head):
// seqlen_q_rounded x head_dim floats, the blocks in row order). A block of block_m rows is
// block_m / 64 bands of 64 rows x head_dim, each in tile::AccFragmentOrder (8-column group i
// of the band at floats 512 i .. 512 i + 511), so that a warpgroup's 64-row part is one
// contiguous run of the band: one bulk reduce-add, no tensor map, no swizzle. The
// postprocess reads it back through AccFragmentOrder's row_of and col_of, of which
// float_index is the inverse.
#if defined(__CUDACC__)
#define FA3_BWD_HOST_DEVICE __host__ __device__
#else
#define FA3_BWD_HOST_DEVICE
#endif
struct DqAccumLayout {
  int head_dim;
  // Floats from the block's start to the part whose first row and column are (row0, col0),
  // row0 a multiple of 64 and col0 of 8.
  FA3_BWD_HOST_DEVICE constexpr int64_t part_offset(int row0, int col0) const {
    return static_cast<int64_t>(row0 / 64) * 64 * head_dim + static_cast<int64_t>(col0) * 64;
  }
  // Float index in the block of its element (row, col): (AccFragmentOrder::index inverted).
  FA3_BWD_HOST_DEVICE constexpr int64_t float_index(int row, int col) const {
    const int r = row % 64, thread = 32 * (r / 16) + 4 * (r % 8) + (col % 8) / 2;
    return part_offset(row - r, 0) + (col / 8) * 512 + 4 * thread + 2 * ((r % 16) / 8) + col % 2;
  }
  // The _dqt kernels' blocks (dQ_i^T computed, DqSplit::HeadDimT): head_dim / 64 runs of
  // 64 x block_m floats, run w dQ^T's head-dim rows [64 w, +64) x the block's block_m rows in
  // tile::AccFragmentOrder. Float index of element (row, col) of the block.
  FA3_BWD_HOST_DEVICE static constexpr int64_t transposed_float_index(int row, int col,
                                                                      int block_m) {
    const int r = col % 64, thread = 32 * (r / 16) + 4 * (r % 8) + (row % 8) / 2;
    return transposed_part_offset(col / 64, block_m) + (row / 8) * 512 + 4 * thread +
           2 * ((r % 16) / 8) + row % 2;
  }
  // Floats from the block's start to run w (warpgroup w's piece of dQ_i^T).
  FA3_BWD_HOST_DEVICE static constexpr int64_t transposed_part_offset(int w, int block_m) {
    return static_cast<int64_t>(w) * 64 * block_m;
  }
};

// The main kernel's CTA order (a 1-D grid of num_n_blocks x batch x heads_kv CTAs). The
// (batch, K/V head) pairs go in sections of `section` pairs (the last one may be narrower);
// within a section the K/V block index is the major one: block 0 of each pair, then block 1
// of each, ... With section 1 every pair's blocks run in order, one pair after the other.
// Causal and deterministic calls take wider sections (the runtime sizes them so that a
// section's Q, dO and dQ accumulator stay in L2). Causal, block 0 is the longest (it sees
// every query block), so the long CTAs start first and near together, and the last wave is
// short ones; one pair after the other, the last pair's block 0 would start near the end and
// run alone (a list-scheduling model of d128 causal 1k-8k on 132 SMs: 5-7% longer than the
// sum of the work allows, against 0-2% with sections). Deterministic, fewer of a pair's
// blocks start together, so the chain of their ordered adds fills in fewer links.
// `shortest_first` reverses the K/V blocks within a section (the last block of each pair
// first): causal calls with ordered adds, whose query blocks take the adds of the later K/V
// blocks first (BwdWork::add_rank), so that a CTA waits only for CTAs that started before it.
struct BwdTile {
  int n_block, kv_head, batch;
};
FA3_BWD_HOST_DEVICE constexpr BwdTile bwd_tile_at(int index, int num_n_blocks, int heads_kv,
                                                  int pairs, int section,
                                                  bool shortest_first = false) {
  const int first_pair = index / (section * num_n_blocks) * section;
  const int within = index - first_pair * num_n_blocks;
  const int width = pairs - first_pair < section ? pairs - first_pair : section;
  const int rank = within / width;
  const int pair = first_pair + (within - rank * width);
  return {shortest_first ? num_n_blocks - 1 - rank : rank, pair % heads_kv, pair / heads_kv};
}

// The split last wave (BwdConfig::splits_last_wave): the first `first` tiles go whole, one a
// draw; then the last tiles' steps, laid end to end (tile by tile, each in its walk's order:
// BwdWork::first_step), go in chunks of `chunk` steps (the last one shorter), one chunk a draw,
// so that the CTAs end the call together. A chunk is at least half a tile (the runtime's
// plan), so it is at most two pieces, the end of one tile and the start of the next, and a
// tile is cut in at most three. Draw first + c is chunk c: items first + 2 c and first + 2 c +
// 1 (the second piece, empty where the chunk ends inside its first tile). Each piece writes its
// fp32 partial dK_j and dV_j to slot c + (tile - first) of the workspace's partials (two pieces
// of a chunk, or of a tile, never share one), and the tile's piece that counts itself done last
// adds the others' into its own and stores the tile (bwd_sum_split_tile).
struct BwdPiece {
  int tile;      // from `first`
  int step0;     // the first of its tile's steps
  int steps;     // 0: an empty second piece
  bool next_too;  // a first piece whose chunk goes on into the next tile
};
// (In 32 bits: the runtime splits only where the last tiles' steps stay below 2^31; 64-bit
// divisions spilled the 24-register roles.)
FA3_BWD_HOST_DEVICE constexpr BwdPiece bwd_piece_at(int item, int tile_steps, int chunk,
                                                    int total_steps) {
  const int c = item / 2, g0 = c * chunk;
  const int g1 = total_steps - g0 > chunk ? g0 + chunk : total_steps;
  const int tile = g0 / tile_steps, end_of_tile = (tile + 1) * tile_steps;
  if (item % 2 == 0)
    return {tile, g0 - tile * tile_steps, (g1 < end_of_tile ? g1 : end_of_tile) - g0,
            g1 > end_of_tile};
  return {tile + 1, 0, g1 > end_of_tile ? g1 - end_of_tile : 0, false};
}
// The chunks a split tile (from `first`) is cut by: [first_chunk, last_chunk].
struct BwdSplitParts {
  int first_chunk, last_chunk;
};
FA3_BWD_HOST_DEVICE constexpr BwdSplitParts bwd_split_parts(int tile, int tile_steps, int chunk) {
  return {tile * tile_steps / chunk, ((tile + 1) * tile_steps - 1) / chunk};
}
#undef FA3_BWD_HOST_DEVICE

struct BwdNameParse {
  bool ok = false;
  BwdConfig config{};
  const char* error = "";
};

// Parses a backward kernel name (constexpr: the kernels parse their own at compile time).
constexpr BwdNameParse parse_bwd_name(const char* name) {
  using namespace fwd_names_detail;
  BwdNameParse r;
  // The forward's start (fwd_names.h): the dtype, then d, m, n, s, w.
  const NameHead head =
      parse_name_head(name, "fa3_bwd_f16", "fa3_bwd_bf16",
                      "a backward kernel name starts with fa3_bwd_f16 or fa3_bwd_bf16");
  if (head.error != nullptr) {
    r.error = head.error;
    return r;
  }
  set_head_fields(r.config, head);
  int pos = head.pos;
  if (spells_at(name, pos, "kvh")) {
    r.config.kv_split = KvSplit::HeadDim;
    pos += 4;
  } else if (spells_at(name, pos, "kvt")) {
    r.config.kv_split = KvSplit::Transposed;
    pos += 4;
  }
  if (spells_at(name, pos, "dqh")) {
    r.config.dq_split = DqSplit::HeadDim;
    pos += 4;
  } else if (spells_at(name, pos, "dqq")) {
    r.config.dq_split = DqSplit::Queries;
    pos += 4;
  } else if (spells_at(name, pos, "dqt")) {
    r.config.dq_split = DqSplit::HeadDimT;
    pos += 4;
  }
  if (spells_at(name, pos, "rw")) {
    r.config.rotated_walk = true;
    pos += 3;
  }
  if (spells_at(name, pos, "fs")) {
    r.config.first_store = true;
    pos += 3;
  }
  if (spells_at(name, pos, "p32")) {
    r.config.producer_regs_32 = true;
    pos += 4;
  }
  if (spells_at(name, pos, "pt")) {
    r.config.persistent = true;
    pos += 3;
  }
  if (spells_at(name, pos, "causal")) {
    r.config.causal = true;
    pos += 7;
  }
  if (name[pos] != '\0') {
    r.error = "a backward kernel name ends after _w<warpgroups>, then _kvh or _kvt, _dqh, _dqq or _dqt, _rw, _fs, _p32, _pt, then _causal";
    return r;
  }
  if (!bwd_config_is_valid(r.config)) {
    r.error = "the config breaks a rule of bwd_config_is_valid (src/kernels/bwd_config.h)";
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace fa3
