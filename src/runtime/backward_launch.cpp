#include "runtime/backward_launch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/forward_launch.h"
#include "runtime/tensor_rules.h"

namespace fa3 {

namespace {

void copy_strides(const fa3_tensor& t, int64_t out[3]) {
  out[0] = t.stride_batch;
  out[1] = t.stride_seq;
  out[2] = t.stride_head;
}

// The kernel's query blocks along seqlen_q (the last one partial where it does not divide).
int64_t query_blocks(const BwdConfig& c, const BackwardProblem& prob) {
  return (prob.seqlen_q + c.block_m - 1) / c.block_m;
}

}  // namespace

bool backward_ordered_adds(const BwdConfig& c, const BackwardProblem& prob) {
  // Causal calls up to 512 queries and keys (1024 at head dim 64) of a kernel without first
  // stores (_fs) take the deterministic mode's ordered dQ adds even when not asked to: there
  // the first adder's stored parts (no zeroed accumulator to write and read back) save more
  // than the order costs (det/default on an H100 after v26z: 1.05-1.12 at 512 causal; at 1k
  // d64 1.05, d128 0.98, d256 0.92). A kernel with first stores zeroes no accumulator in its
  // default mode either, and the order only costs there (unordered / ordered on an H200, v38:
  // d128 and d256 causal 1.035-1.045 at 256, 1.071-1.076 at 512).
  const int64_t longest = c.head_dim == 64 ? 1024 : 512;
  return prob.deterministic || (c.causal && !c.first_store && prob.seqlen_q <= longest &&
                                prob.seqlen_k <= longest);
}

int32_t backward_add_order(const BwdConfig& c, const BackwardProblem& prob) {
  if (!backward_ordered_adds(c, prob)) return 0;
  // The kernels with an _lf entry (BwdConfig::causal_last_first: d64 causal) take the last
  // K/V block's adds first for every deterministic call, and for the default mode's small
  // causal calls from 6 query blocks: last-first / K/V block order, bf16 and fp16 alike, on
  // an H200 0.982-0.989 at 2-5 blocks of 128 rows (256-640) and 1.026-1.043 at 6-8 (768-1024);
  // this rule against the one before, 0.997-1.002 at 512-640 and 1.031-1.042 at 768-1024 (H200),
  // 0.999-1.001 and 1.014-1.029 (H100; docs/perf-history.md v49).
  constexpr int64_t kLastFirstMinQueryBlocks = 6;
  const bool last_first = c.causal_last_first() &&
                          (prob.deterministic || query_blocks(c, prob) >= kLastFirstMinQueryBlocks);
  return last_first ? kOrderedLastFirst : kOrderedKvBlocks;
}

int backward_l2_section(const BwdConfig& c, const BackwardProblem& prob) {
  // Non-causal calls with unordered adds keep one pair after the other: sections measured
  // 1-2% slower from 2k (up to 11% at 512: the resident CTAs read more pairs' Q and dO).
  // Ordered ones take sections: fewer of a pair's K/V blocks start together, so the chain of
  // their ordered adds fills faster (deterministic d64 non-causal 1k-8k +8-21%, d256 +4-11%).
  if (!c.causal && !backward_ordered_adds(c, prob)) return 1;
  // A pair's Q and dO (16-bit) and dQ accumulator (fp32), for all the query heads of its
  // group; 40 MiB of the 50 MiB L2 (H100, H200) for them, in a power of two of pairs.
  const int64_t pair_bytes =
      (prob.heads / prob.heads_kv) * prob.seqlen_q * prob.head_dim * (2 + 2 + 4);
  const int64_t budget = int64_t{40} << 20;
  const int64_t pairs = prob.batch * prob.heads_kv;
  int64_t section = 1;
  while (section * 2 <= pairs && section * 2 * pair_bytes <= budget) section *= 2;
  // Ordered adds at head dims 64 and 128 take half a section of 8 pairs or more: a pair's K/V
  // blocks, which add in turn, then start closer together. Deterministic, halved / not, bf16,
  // 1k / 2k / 4k, H200 (H100 from 2k): d128 non-causal 1.076 / 1.041 / 1.010 (1.107 / 1.046),
  // d128 causal 1.047 / 1.019 / 0.991 (1.041 / 1.003), d64 non-causal 1.025 / 1.016 / 1.049
  // (1.049 / 1.000); d64 causal 512 / 1k, whose default mode orders its adds, 1.026 / 1.018.
  // Halved below 8 pairs (the paper grid's d128 from 8k) it was level to 2-3% slower at d128
  // causal; at head dim 256 (80-key tiles) 0.932 / 0.957 at 2k non-causal / causal
  // (docs/perf-history.md v55).
  if (backward_ordered_adds(c, prob) && c.head_dim <= 128 && section >= 8) section /= 2;
  return static_cast<int>(section);
}

BackwardSplitPlan backward_split_plan(const BwdConfig& c, const BackwardProblem& prob,
                                      int64_t tiles, int64_t tile_steps, int64_t ctas) {
  BackwardSplitPlan none;
  none.first = none.draws = tiles;
  if (!backward_kernel_splits(c) || backward_ordered_adds(c, prob) ||
      tile_steps < kSplitMinTileSteps || tiles < 1 || ctas < 1)
    return none;
  // The last wave's tiles (all of them where there are fewer than CTAs), their steps in chunks
  // of an equal share for each CTA, but at least half a tile (a tile in at most three pieces).
  const int64_t last = tiles % ctas, steps = last * tile_steps;
  const int64_t chunk = std::max((steps + ctas - 1) / ctas, (tile_steps + 1) / 2);
  // (The kernels count the last tiles' steps in 32 bits: bwd_piece_at.)
  if (last == 0 || 4 * chunk > 3 * tile_steps || steps + chunk > INT32_MAX) return none;
  const int64_t chunks = (steps + chunk - 1) / chunk;
  // Piece slots c + (tile - first) (bwd_piece_at) up to chunks + last - 2, a counter a tile.
  const BackwardWorkspace ws = backward_workspace(prob);
  if (chunks + last - 1 > static_cast<int64_t>(ws.split_slots) ||
      last > static_cast<int64_t>(ws.split_tiles))
    return none;
  BackwardSplitPlan plan;
  plan.first = tiles - last;
  plan.draws = plan.first + chunks;
  plan.chunk = chunk;
  return plan;
}

namespace {

// Everything but the launches and the workspace: the parameter block (tensor maps, strides,
// sizes; the workspace's regions left null) and the grids (a persistent main kernel's: at most
// sm_count CTAs). Fails (before anything runs) when the driver rejects a tensor map.
Error build_backward_params(const Driver& d, const KernelInfo& kernel, const BackwardProblem& prob,
                            const fa3_tensor& q, const fa3_tensor& k, const fa3_tensor& v,
                            const fa3_tensor& o, const fa3_tensor& dout, const float* lse,
                            const fa3_tensor& dq, const fa3_tensor& dk, const fa3_tensor& dv,
                            int sm_count, BwdParams* params, BackwardGrids* grids) {
  // check_backward_inputs bounded the grids: heads and batch at most 65535, the main grid's
  // CTAs below 2^31 with 64-key blocks (the smallest block_n).
  const BwdConfig& c = kernel.bwd;
  const int64_t rows = backward_rows(prob.seqlen_q);
  if (query_blocks(c, prob) * c.block_m > rows ||
      c.block_m < kWorkspaceSemaphoreRows)
    return make_error(FA3_ERR_INTERNAL, "kernel " + kernel.name +
                                            " has query blocks the workspace layout does not tile");
  BwdParams p;
  std::memset(&p, 0, sizeof p);
  // K_j, V_j, dK_j and dV_j move in boxes of kv_box_rows() keys, Q_i and dO_i of
  // q_box_rows().
  const unsigned kv_box_rows = static_cast<unsigned>(c.kv_box_rows());
  const unsigned q_box_rows = static_cast<unsigned>(c.q_box_rows());
  Error e = encode_tensor_map(d, q, "q", q_box_rows, &p.tma_q);
  if (!e.failed()) e = encode_tensor_map(d, k, "k", kv_box_rows, &p.tma_k);
  if (!e.failed()) e = encode_tensor_map(d, v, "v", kv_box_rows, &p.tma_v);
  if (!e.failed()) e = encode_tensor_map(d, dout, "dout", q_box_rows, &p.tma_do);
  if (e.failed()) return e;
  // dK and dV by TMA where both meet the TMA layout rule q, k, v and dout are held to
  // (tensor_rules::check_layout); otherwise (or should the driver refuse a map) the kernel's
  // 4-byte stores, which take any layout the argument checks accept.
  p.dkv_tma = !tensor_rules::check_layout(dk, "dk", 2).failed() &&
              !tensor_rules::check_layout(dv, "dv", 2).failed() &&
              !encode_tensor_map(d, dk, "dk", kv_box_rows, &p.tma_dk).failed() &&
              !encode_tensor_map(d, dv, "dv", kv_box_rows, &p.tma_dv).failed();
  p.o = static_cast<const uint16_t*>(o.data);
  p.dout = static_cast<const uint16_t*>(dout.data);
  p.dq = static_cast<uint16_t*>(dq.data);
  p.dk = static_cast<uint16_t*>(dk.data);
  p.dv = static_cast<uint16_t*>(dv.data);
  copy_strides(o, p.o_stride);
  copy_strides(dout, p.do_stride);
  copy_strides(dq, p.dq_stride);
  copy_strides(dk, p.dk_stride);
  copy_strides(dv, p.dv_stride);
  p.lse = lse;
  p.seqlen_q = static_cast<int32_t>(prob.seqlen_q);
  p.seqlen_k = static_cast<int32_t>(prob.seqlen_k);
  p.seqlen_q_rounded = static_cast<int32_t>(rows);
  p.heads = static_cast<int32_t>(prob.heads);
  p.heads_kv = static_cast<int32_t>(prob.heads_kv);
  p.batch = static_cast<int32_t>(prob.batch);
  p.heads_per_kv_head = static_cast<int32_t>(prob.heads / prob.heads_kv);
  p.num_m_blocks = static_cast<int32_t>(query_blocks(c, prob));
  p.num_n_blocks = static_cast<int32_t>((prob.seqlen_k + c.block_n - 1) / c.block_n);
  p.scale = prob.softmax_scale;
  p.scale_log2 = static_cast<float>(static_cast<double>(prob.softmax_scale) * M_LOG2E);
  p.ordered_adds = backward_add_order(c, prob);
  p.l2_section = backward_l2_section(c, prob);
  const int64_t ctas = static_cast<int64_t>(p.num_n_blocks) * prob.batch * prob.heads_kv;
  if (ctas > INT32_MAX)
    return make_error(FA3_ERR_INTERNAL, "kernel " + kernel.name + " would need " +
                                            std::to_string(ctas) +
                                            " CTAs, which check_backward_inputs should have refused");
  p.num_tiles = static_cast<int32_t>(ctas);
  // _pt: a CTA per SM (one fits an SM), its tiles drawn from the workspace's counter
  // (bwd_kernel.cuh, bwd_for_each_tile), with the last wave split where that pays
  // (backward_split_plan: at most one draw a tile, and a chunk of the last tiles at most a CTA);
  // otherwise a CTA per tile.
  const int64_t sms = std::max(1, sm_count);
  const BackwardSplitPlan split = backward_split_plan(
      c, prob, ctas, static_cast<int64_t>(p.num_m_blocks) * p.heads_per_kv_head, sms);
  p.split_first = static_cast<int32_t>(split.first);
  p.split_draws = static_cast<int32_t>(split.draws);
  p.split_chunk = static_cast<int32_t>(split.chunk);
  *params = p;
  const unsigned m_blocks = static_cast<unsigned>(p.num_m_blocks);
  const unsigned main_ctas =
      c.persistent ? static_cast<unsigned>(std::min<int64_t>(split.draws, sms))
                   : static_cast<unsigned>(ctas);
  *grids = {{m_blocks, static_cast<unsigned>(prob.heads), static_cast<unsigned>(prob.batch)},
            {main_ctas, 1u, 1u},
            {m_blocks, static_cast<unsigned>(prob.heads), static_cast<unsigned>(prob.batch)}};
  return Error::ok();
}

// Points the parameter block's scratch (lse_log2, dpsum, dq_accum, dq_semaphore, tile_counter)
// at the regions of backward_workspace(prob) in `workspace`.
void set_backward_workspace(const BackwardProblem& prob, CUdeviceptr workspace,
                            BwdParams* params) {
  const BackwardWorkspace ws = backward_workspace(prob);
  params->lse_log2 = reinterpret_cast<float*>(workspace + ws.lse_log2);
  params->dpsum = reinterpret_cast<float*>(workspace + ws.dpsum);
  params->dq_accum = reinterpret_cast<float*>(workspace + ws.dq_accum);
  params->dq_semaphore = reinterpret_cast<int32_t*>(workspace + ws.dq_semaphore);
  params->tile_counter = reinterpret_cast<uint32_t*>(workspace + ws.tile_counter);
  params->dkv_partial = reinterpret_cast<float*>(workspace + ws.dkv_partial);
  params->split_counters = reinterpret_cast<int32_t*>(workspace + ws.split_counters);
}

}  // namespace

Error prepare_backward(fa3_handle* h, const Context& context, const KernelInfo& kernel,
                       const BackwardProblem& prob, const fa3_tensor& q, const fa3_tensor& k,
                       const fa3_tensor& v, const fa3_tensor& o, const fa3_tensor& dout,
                       const float* lse, const fa3_tensor& dq, const fa3_tensor& dk,
                       const fa3_tensor& dv, BackwardCall* out) {
  out->kernel = &kernel;
  Error e = get_backward_functions(h, context, kernel, &out->functions);
  if (e.failed()) return e;
  return build_backward_params(h->driver, kernel, prob, q, k, v, o, dout, lse, dq, dk, dv,
                               h->sm_count, &out->params, &out->grids);
}

// The first driver version whose stream capture takes programmatic dependent launches.
constexpr int kProgrammaticLaunchDriver = 12030;

Error launch_backward(fa3_handle* h, const BackwardProblem& prob, const BackwardCall& call,
                      CUdeviceptr workspace, CUstream stream) {
  const KernelInfo& kernel = *call.kernel;
  const BackwardFunctions& functions = call.functions;
  const BackwardGrids& grids = call.grids;
  BwdParams params = call.params;
  set_backward_workspace(prob, workspace, &params);
  // With kBackwardProgrammaticLaunch, the main kernel and the postprocess by programmatic
  // dependent launch: each may be scheduled while the kernel before it finishes (its last
  // wave, its launch latency) and waits in the kernel (griddepcontrol.wait) before it reads
  // what that one wrote; drivers before 12.3 cannot capture such launches into a graph. Off,
  // all three are ordinary launches, each after the one before (the kernels' griddepcontrol
  // instructions are then no-ops).
  struct Step {
    CUfunction function;
    const unsigned* grid;
    unsigned threads, smem;
    bool dependent;
    const char* what;
  };
  // Calls with the last K/V block's dQ adds first (backward_add_order: d64 causal) run the
  // cubin's _lf entry, the same main loop in that order (BwdConfig::causal_last_first).
  const bool last_first = params.ordered_adds == kOrderedLastFirst;
  const Step steps[3] = {
      {functions.pre, grids.pre, kBwdAuxThreads, 0, false, "_pre"},
      {last_first ? functions.last_first : functions.main, grids.main,
       static_cast<unsigned>(kernel.bwd.threads()), BwdSmemLayout::of(kernel.bwd).total_bytes,
       true, last_first ? "_lf" : ""},
      {functions.post, grids.post, kBwdAuxThreads, 0, true, "_post"},
  };
  CUlaunchAttribute programmatic;
  std::memset(&programmatic, 0, sizeof programmatic);
  programmatic.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  programmatic.value.programmaticStreamSerializationAllowed = 1;
  for (const Step& s : steps) {
    const bool first = &s == &steps[0];
    CUlaunchConfig config;
    std::memset(&config, 0, sizeof config);
    config.gridDimX = s.grid[0];
    config.gridDimY = s.grid[1];
    config.gridDimZ = s.grid[2];
    config.blockDimX = s.threads;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = s.smem;
    config.hStream = stream;
    if (kBackwardProgrammaticLaunch && s.dependent &&
        h->driver.version >= kProgrammaticLaunchDriver) {
      config.attrs = &programmatic;
      config.numAttrs = 1;
    }
    void* args[] = {&params};
    const CUresult r = h->driver.launch_kernel_ex(&config, s.function, args, nullptr);
    if (r != CUDA_SUCCESS)
      return h->driver.fail(r, "launching " + kernel.name + s.what + " (cuLaunchKernelEx" +
                                   (first ? "" : "; the kernels before it were launched") + ")");
  }
  return Error::ok();
}

}  // namespace fa3
