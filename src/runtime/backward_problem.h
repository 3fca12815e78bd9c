// Argument checks of fa3_backward and fa3_backward_workspace_size, the problem they describe,
// and the layout of the backward's workspace. Pure host code: runs and is tested without a
// GPU. Every rule an argument can break has its own sentence naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fa3/fa3.h"
#include "kernels/bwd_config.h"
#include "kernels/fwd_config.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

namespace fa3 {

struct BackwardProblem {
  DType dtype = DType::BF16;
  int head_dim = 0;
  bool causal = false;
  bool deterministic = false;
  float softmax_scale = 0;  // the effective scale (p->softmax_scale or 1/sqrt(head_dim))
  int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads = 0, heads_kv = 0;
};

// The fp32 scratch of one backward call, as byte offsets from the workspace base (256-byte
// aligned, as are the first four regions). With seqlen_q_rounded = backward_rows(seqlen_q)
// (whole query blocks of every backward kernel): lse_log2 and dpsum: float[batch * heads *
// seqlen_q_rounded]; dq_accum: float[batch * heads * seqlen_q_rounded * head_dim];
// dq_semaphore: int32[batch * heads * seqlen_q_rounded / 64] (one per query block of the
// smallest, 64 rows); tile_counter: one uint32 right after (the _pt kernels' tile counter).
// Non-causal problems without the deterministic mode whose key has a kernel that splits
// (backward_key_splits: the persistent kernels' split last wave) then have, 256-byte aligned,
// dkv_partial: float[split_slots * 2 * 128 * head_dim] (a split piece's partial dK_j and dV_j
// of 128 keys each) and split_counters: int32[split_tiles], where with T = batch * heads_kv *
// ceil(seqlen_k / 128) split_slots = min(3 T, 2 kSplitMaxCtas) and split_tiles = min(T,
// kSplitMaxCtas) (enough for grids of up to kSplitMaxCtas CTAs; 0 for other problems).
// total: the bytes a workspace needs (the end of the last region).
template <class Int>
struct WorkspaceRegions {
  Int lse_log2, dpsum, dq_accum, dq_semaphore, tile_counter, dkv_partial, split_counters, total;
  Int split_slots, split_tiles;  // counts, not offsets
};
using BackwardWorkspace = WorkspaceRegions<size_t>;
constexpr size_t kWorkspaceAlignment = 256;
constexpr int64_t kWorkspaceSemaphoreRows = 64;  // the rows of a dq_semaphore entry: the smallest
// The most CTAs a split last wave is planned for (a whole GH100 has 144 SMs; an H100 SXM or an
// H200 132): more SMs than this, and the grids take their tiles whole.
constexpr int64_t kSplitMaxCtas = 144;
// The keys of a split tile (the persistent kernels' block_n).
constexpr int64_t kSplitTileKeys = 128;

// The rows of a (batch, head) in the workspace: seqlen_q rounded up to whole query blocks of
// every backward kernel's block_m (64, 128: a multiple of 128; the _dqt kernels' 80: a
// multiple of 80), so that any kernel's last block lies inside (the larger of the two).
constexpr int64_t backward_rows(int64_t seqlen_q) {
  const int64_t by128 = (seqlen_q + 127) / 128 * 128, by80 = (seqlen_q + 79) / 80 * 80;
  return by128 > by80 ? by128 : by80;
}

BackwardWorkspace backward_workspace(const BackwardProblem& prob);

// Whether a kernel can split its last wave into the workspace's regions: a persistent
// non-causal one (BwdConfig::splits_last_wave) whose tiles are kSplitTileKeys keys, the keys
// of a partial slot.
constexpr bool backward_kernel_splits(const BwdConfig& c) {
  return c.splits_last_wave() && c.block_n == kSplitTileKeys;
}

// Whether a compiled backward kernel of (dtype, head_dim) can split (backward_kernel_splits):
// then the key's non-causal default-mode problems have the split regions (any kernel a table
// or a name may pick can use them). In the production set: head dim 128 (_dqt_rw_fs_pt); at
// head dim 64 the regions would hold 19 MB that the pick (a CTA a tile) never uses.
bool backward_key_splits(DType dtype, int64_t head_dim);

// Checks q, k and p alone (what the workspace size and the choice of a kernel need). `p` may
// be NULL (defaults). On success fills *out.
Error check_backward_inputs(const fa3_tensor* q, const fa3_tensor* k, const fa3_params* p,
                            BackwardProblem* out);

// Checks every argument of fa3_backward but the workspace (no tensor is dereferenced).
Error check_backward(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                     const fa3_tensor* o, const fa3_tensor* dout, const float* lse,
                     const fa3_tensor* dq, const fa3_tensor* dk, const fa3_tensor* dv,
                     const fa3_params* p, BackwardProblem* out);

// A caller's workspace (NULL passes: the handle then owns one): 256-byte aligned, at least
// backward_workspace(prob).total bytes, sharing no memory with a tensor or lse. Call after
// check_backward succeeded.
Error check_backward_workspace(const BackwardProblem& prob, const void* workspace,
                               size_t workspace_bytes, const fa3_tensor* q, const fa3_tensor* k,
                               const fa3_tensor* v, const fa3_tensor* o, const fa3_tensor* dout,
                               const float* lse, const fa3_tensor* dq, const fa3_tensor* dk,
                               const fa3_tensor* dv);

// Whether a compiled backward kernel can run this problem (dtype, head_dim, causal).
bool bwd_config_fits(const BwdConfig& c, const BackwardProblem& problem);

// The kernel a backward call runs: the tuning table's pick for the problem (direction bwd),
// or, when the table has no bwd entry for its key (a user's table may have none), the first
// of `kernels` (compiled_backward_kernels(), in name order) that fits the problem;
// FA3_ERR_UNSUPPORTED when none does.
Error select_backward_kernel(const TuningTable& table, const std::vector<KernelInfo>& kernels,
                             const BackwardProblem& prob, const KernelInfo** out);
// The fallback alone: the first of `kernels` that fits the problem.
Error select_backward_kernel(const std::vector<KernelInfo>& kernels, const BackwardProblem& prob,
                             const KernelInfo** out);

}  // namespace fa3
