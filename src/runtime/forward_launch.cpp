#include "runtime/forward_launch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace fa3 {

Error encode_tensor_map(const Driver& d, const fa3_tensor& t, const char* name, unsigned box_rows,
                        TensorMapBytes* out) {
  static_assert(sizeof(TensorMapBytes) == sizeof(CUtensorMap), "tensor map size");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.head_dim), static_cast<cuuint64_t>(t.seqlen),
                              static_cast<cuuint64_t>(t.heads), static_cast<cuuint64_t>(t.batch)};
  // A dimension of size 1 is never stepped along; give it a stride TMA accepts whatever the
  // caller's (possibly 0) stride was.
  auto stride_bytes = [&](int64_t size, int64_t stride) -> cuuint64_t {
    return size == 1 ? static_cast<cuuint64_t>(t.head_dim * 2) : static_cast<cuuint64_t>(stride * 2);
  };
  const cuuint64_t strides[3] = {stride_bytes(t.seqlen, t.stride_seq),
                                 stride_bytes(t.heads, t.stride_head),
                                 stride_bytes(t.batch, t.stride_batch)};
  const cuuint32_t box[4] = {64, box_rows, 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      t.dtype == FA3_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap map;
  const CUresult r = d.tensor_map_encode_tiled(
      &map, type, 4, t.data, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return make_error(FA3_ERR_INVALID_ARGUMENT,
                      std::string("the driver rejected the TMA tensor map of ") + name +
                          " (cuTensorMapEncodeTiled: " + d.describe(r) +
                          "); check its data pointer and strides");
  std::memcpy(out, &map, sizeof map);
  return Error::ok();
}

int32_t causal_l2_group(int64_t kv_bytes_per_pair, int64_t m_blocks, int64_t pairs, int sm_count) {
  const double sms = static_cast<double>(std::max(1, sm_count));
  const double fit = std::floor(8.0 * (1 << 20) / static_cast<double>(std::max<int64_t>(1, kv_bytes_per_pair)));
  const double fill = sms / static_cast<double>(std::max<int64_t>(1, m_blocks)) + sms / 64;
  const double target = std::max({1.0, fit, fill});
  int64_t group = 1;  // the power of two nearest the target (by ratio), at most pairs
  while (group * 2 <= pairs && static_cast<double>(group) * std::sqrt(2.0) < target) group *= 2;
  // At most 16 MiB of K and V where three quarters of a tile per SM remain.
  const int64_t kv = std::max<int64_t>(1, kv_bytes_per_pair);
  while (group > 1 && group * kv > (int64_t{16} << 20) &&
         static_cast<double>(group / 2 * std::max<int64_t>(1, m_blocks)) >= 0.75 * sms)
    group /= 2;
  return static_cast<int32_t>(group);
}

Error build_forward_params(const Driver& d, const KernelInfo& kernel, const ForwardProblem& prob,
                           const fa3_tensor& q, const fa3_tensor& k, const fa3_tensor& v,
                           const fa3_tensor& o, float* lse, int sm_count, FwdParams* params,
                           unsigned* grid) {
  const FwdConfig& c = kernel.fwd;
  FwdParams p;
  std::memset(&p, 0, sizeof p);
  // In a cluster each CTA loads block_n / cluster_m rows of every K/V block.
  const unsigned kv_box_rows = static_cast<unsigned>(c.block_n / c.cluster_m);
  Error e = encode_tensor_map(d, q, "q", 64, &p.tma_q);
  if (!e.failed()) e = encode_tensor_map(d, k, "k", kv_box_rows, &p.tma_k);
  if (!e.failed()) e = encode_tensor_map(d, v, "v", kv_box_rows, &p.tma_v);
  if (!e.failed()) e = encode_tensor_map(d, o, "o", 64, &p.tma_o);
  if (e.failed()) return e;
  p.lse = lse;
  p.seqlen_q = static_cast<int32_t>(prob.seqlen_q);
  p.seqlen_k = static_cast<int32_t>(prob.seqlen_k);
  p.heads = static_cast<int32_t>(prob.heads);
  p.batch = static_cast<int32_t>(prob.batch);
  p.heads_per_kv_head = static_cast<int32_t>(prob.heads / prob.heads_kv);
  // A cluster's CTAs take neighbouring query blocks of one head: the count is rounded up to
  // whole clusters, and a block past seqlen_q computes on zero-filled Q and stores nothing
  // (its loads are still the other CTA's half of K and V).
  int64_t m_blocks = (prob.seqlen_q + c.block_m - 1) / c.block_m;
  m_blocks = (m_blocks + c.cluster_m - 1) / c.cluster_m * c.cluster_m;
  // check_forward bounded ceil(seqlen_q / 64) * heads * batch below 2^31 and block_m >= 128,
  // which leaves room for the rounding of a 2-CTA cluster but not for every larger one.
  const int64_t tiles = m_blocks * prob.heads * prob.batch;
  if (tiles > INT32_MAX)
    return make_error(FA3_ERR_UNSUPPORTED, "q->batch * q->heads * query blocks = " +
                                               std::to_string(tiles) + " for " + kernel.name +
                                               " exceeds the 2^31 - 1 blocks of a grid");
  p.num_m_blocks = static_cast<int32_t>(m_blocks);
  p.num_tiles = static_cast<int32_t>(tiles);
  p.scale_log2 = static_cast<float>(static_cast<double>(prob.softmax_scale) * M_LOG2E);
  const int64_t heads_batch = prob.heads * prob.batch;
  // The pairs of a group are neighbours, and so are the query heads that share a K/V head
  // (GQA/MQA): each pair brings 1 / heads_per_kv_head of a K/V head's bytes to the group.
  const int64_t kv_head_bytes = 2 * prob.seqlen_k * static_cast<int64_t>(c.head_dim) * 2;
  p.l2_group = causal_l2_group(
      (kv_head_bytes + p.heads_per_kv_head - 1) / p.heads_per_kv_head, m_blocks, heads_batch,
      sm_count);
  // Every divisor is at least 1 and below 2^31: tiles < 2^31 was checked above.
  p.m_blocks_div = make_fast_divisor(static_cast<uint32_t>(m_blocks));
  p.heads_div = make_fast_divisor(static_cast<uint32_t>(prob.heads));
  p.kv_group_div = make_fast_divisor(static_cast<uint32_t>(p.heads_per_kv_head));
  p.group_tiles_div = make_fast_divisor(static_cast<uint32_t>(p.l2_group * m_blocks));
  p.l2_group_div = make_fast_divisor(static_cast<uint32_t>(p.l2_group));
  const int64_t last_group = heads_batch - (heads_batch - 1) / p.l2_group * p.l2_group;
  p.last_group_div = make_fast_divisor(static_cast<uint32_t>(last_group));
  *params = p;
  // Every forward kernel takes a whole SM (registers: __launch_bounds__(threads, 1)).
  *grid = static_cast<unsigned>(c.persistent() ? std::min(p.num_tiles, std::max(1, sm_count))
                                             : p.num_tiles);
  return Error::ok();
}

Error launch_forward(fa3_handle* h, const KernelInfo& kernel, const ForwardProblem& prob,
                     const fa3_tensor& q, const fa3_tensor& k, const fa3_tensor& v,
                     const fa3_tensor& o, float* lse, CUstream stream) {
  ContextScope scope(h);
  if (scope.error().failed()) return scope.error();
  CUfunction function = nullptr;
  Error e = get_function(h, scope.context(), kernel, &function);
  if (e.failed()) return e;
  FwdParams params;
  unsigned grid = 0;
  e = build_forward_params(h->driver, kernel, prob, q, k, v, o, lse, h->sm_count, &params, &grid);
  if (e.failed()) return e;
  if (kernel.fwd.draws_tiles()) {
    CUdeviceptr counter = 0;
    e = stream_tile_counter(h, scope.context(), stream, &counter);
    if (e.failed()) return e;
    params.tile_counter = reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(counter));
  }

  CUlaunchConfig config;
  std::memset(&config, 0, sizeof config);
  config.gridDimX = grid;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = static_cast<unsigned>(kernel.fwd.threads());
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = FwdSmemLayout::of(kernel.fwd).total_bytes;
  config.hStream = stream;
  // Lab kernels with clusters (cluster_m CTAs on neighbouring query blocks): the cluster
  // shape is a launch attribute, as the kernel's name is its only compile-time input.
  CUlaunchAttribute cluster;
  std::memset(&cluster, 0, sizeof cluster);
  if (kernel.fwd.cluster_m > 1) {
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = static_cast<unsigned>(kernel.fwd.cluster_m);
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  void* args[] = {&params};
  const CUresult r = h->driver.launch_kernel_ex(&config, function, args, nullptr);
  if (r != CUDA_SUCCESS) return h->driver.fail(r, "launching " + kernel.name + " (cuLaunchKernelEx)");
  return Error::ok();
}

}  // namespace fa3
