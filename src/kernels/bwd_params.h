// The backward kernels' parameter block, written by the host runtime and passed by value as a
// __grid_constant__ kernel parameter (the tensor maps must live in parameter space for TMA).
#pragma once

#include <stdint.h>

#include "kernels/fast_divisor.h"
#include "kernels/fwd_params.h"

namespace fa3 {

// BwdParams::ordered_adds: a query block's dQ adds in K/V block order (non-causal calls;
// causal ones walk the query blocks descending), or, causal only, the last K/V block's first
// (the query blocks ascending, the CTAs shortest first: BwdWork::add_rank).
enum BwdOrder : int32_t { kOrderedKvBlocks = 1, kOrderedLastFirst = 2 };

struct BwdParams {
  // 4-D maps over (head_dim, seqlen, heads, batch), innermost first, 128B swizzle, boxes of
  // 64 columns x BwdConfig::q_box_rows() (Q, dO) or kv_box_rows() (K, V) rows.
  TensorMapBytes tma_q, tma_k, tma_v, tma_do;
  // dK and dV as the same maps (heads_kv heads), for the epilogue's TMA stores; encoded only
  // when both tensors meet TMA's rules (16-byte aligned data and strides), dkv_tma then 1.
  TensorMapBytes tma_dk, tma_dv;
  // The caller's O and dO (preprocess), and the outputs: 16-bit, strides in elements.
  const uint16_t* o;
  const uint16_t* dout;
  uint16_t* dq;
  uint16_t* dk;
  uint16_t* dv;
  int64_t o_stride[3], do_stride[3], dq_stride[3], dk_stride[3], dv_stride[3];  // b, s, h
  const float* lse;  // the forward's (batch, heads, seqlen_q), natural log
  // Workspace (fp32), each (batch, heads, seqlen_q_rounded[, head_dim]): LSE * log2(e) (+inf
  // for rows past seqlen_q and rows that saw no key, so that their P is 0), D = rowsum(dO * O),
  // the dQ accumulator (each query block in DqAccumLayout, bwd_config.h); and
  // (ordered adds, and the _fs kernels' tickets: bwd_dq_writer) one counter per (batch,
  // head, query block).
  float* lse_log2;
  float* dpsum;
  float* dq_accum;
  int32_t* dq_semaphore;
  int32_t seqlen_q, seqlen_k, seqlen_q_rounded;
  int32_t heads, heads_kv, batch;
  int32_t heads_per_kv_head;
  int32_t num_m_blocks, num_n_blocks;
  int32_t l2_section;  // (batch, K/V head) pairs of a section of the CTA order (bwd_tile_at)
  float scale;       // softmax_scale
  float scale_log2;  // softmax_scale * log2(e)
  // The deterministic mode's ordered dQ adds (the first K/V block in a query block's order
  // stores, the others add in that order: BwdWork::add_rank): deterministic calls, and small
  // causal ones (backward_ordered_adds); 0 (unordered) or the order (BwdOrder).
  int32_t ordered_adds;
  int32_t dkv_tma;  // dK and dV stored by TMA through shared memory (else by 4-byte stores)
  // _pt: the tiles (num_n_blocks x batch x heads_kv, bwd_tile_at's order) and the workspace's
  // tile counter (zeroed by the preprocess; the main kernel draws after its wait for it; with
  // ordered adds every tile is drawn, the first wave's too: bwd_draw_tile).
  int32_t num_tiles;
  uint32_t* tile_counter;
  // The split last wave (BwdConfig::splits_last_wave, bwd_piece_at): the tiles that go whole
  // (num_tiles: none split), the chunks' steps and the draws (split_first + chunks;
  // num_tiles: none split); the workspace's fp32 partial dK_j, dV_j (a slot of 2 x block_n x
  // head_dim floats each) and a counter per split tile (zeroed by the preprocess).
  int32_t split_first, split_draws, split_chunk;
  float* dkv_partial;
  int32_t* split_counters;
};

}  // namespace fa3
