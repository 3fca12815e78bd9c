// The forward kernel's parameter block, written by the host runtime and passed by value as a
// __grid_constant__ kernel parameter (the tensor maps must live in parameter space for TMA).
#pragma once

#include <stdint.h>

#include "kernels/fast_divisor.h"

namespace fa3 {

// Same size and alignment as the driver's CUtensorMap (opaque 128 bytes, 64-byte aligned);
// the host encodes it with cuTensorMapEncodeTiled.
struct alignas(64) TensorMapBytes {
  uint64_t opaque[16];
};

struct FwdParams {
  // 4-D maps over (head_dim, seqlen, heads, batch), innermost first, 128B swizzle.
  // Q and O boxes are 64 columns x 64 rows; K and V boxes 64 columns x block_n rows.
  TensorMapBytes tma_q, tma_k, tma_v, tma_o;
  float* lse;              // (batch, heads, seqlen_q) fp32, or null
  int32_t seqlen_q, seqlen_k;
  int32_t heads, batch;
  int32_t heads_per_kv_head;  // GQA/MQA group size: kv head = head / heads_per_kv_head
  int32_t num_m_blocks;       // ceil(seqlen_q / block_m)
  int32_t num_tiles;          // num_m_blocks * heads * batch; the grid walks them round-robin
  float scale_log2;           // softmax_scale * log2(e)
  // Kernels that draw their tiles (FwdConfig::draws_tiles: persistent and causal, or with
  // dynamic_schedule): tiles are handed out through this counter (0 at the start
  // of a launch, and 0 again at its end), in groups of this many (batch, head) pairs whose
  // K and V fit in L2 together.
  uint32_t* tile_counter;
  int32_t l2_group;
  // The divisions of a tile index into (query block, head, batch) and of a head into its
  // KV head, by the launch's constants (fast_divisor.h): query blocks, heads,
  // heads_per_kv_head; causal persistent also l2_group * query blocks, l2_group and the
  // size of the last, possibly smaller, group.
  FastDivisor m_blocks_div, heads_div, kv_group_div;
  FastDivisor group_tiles_div, l2_group_div, last_group_div;
};

}  // namespace fa3
