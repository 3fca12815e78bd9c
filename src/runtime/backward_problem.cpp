#include "runtime/backward_problem.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/tensor_rules.h"

namespace fa3 {

using namespace tensor_rules;

namespace {

// The smallest block_n of a backward kernel (the _kvh kernels' 64; the others' 80 or 128): the
// main grid's CTA count is largest with it.
constexpr int64_t kSmallestKeyBlock = 64;

// fa3_backward_workspace_size reports a size_t; a workspace of 2^63 bytes or more is no
// allocation a device can make, and its offsets would wrap.
constexpr Int128 kMaxWorkspaceBytes = static_cast<Int128>(INT64_MAX);

// o, dq, dk and dv may not be TMA tensors (dk and dv go by TMA only where their layout
// allows it, o is read 16 bytes at a time only where aligned): the kernels' fallback reads
// and writes them as pairs of elements (32-bit accesses), so a pair must never straddle a
// 4-byte boundary.
Error check_pair_layout(const fa3_tensor& t, const char* name) {
  if (reinterpret_cast<uintptr_t>(t.data) % 4 != 0)
    return invalid(std::string(name) + "->data (" + pointer_text(t.data) +
                   ") must be 4-byte aligned (the kernels access element pairs)");
  return check_strides(t, name, 2, [](const Dim& d, const std::string& field) {
    if (d.stride % 2 != 0)
      return invalid(field + " (" + num(d.stride) +
                     ") must be even (the kernels access element pairs)");
    return Error::ok();
  });
}

// The preprocess's and postprocess's grids are (query blocks, heads, batch): the y and z of a
// grid are at most 65535. The main grid is one-dimensional: a CTA per (batch, K/V head, key
// block), below 2^31 with the smallest key block.
Error check_grid(const fa3_tensor& q, const fa3_tensor& k) {
  constexpr int64_t kMaxGridYZ = 65535;
  if (q.heads > kMaxGridYZ)
    return make_error(FA3_ERR_UNSUPPORTED, "q->heads (" + num(q.heads) +
                                               ") must be at most 65535 for fa3_backward (its "
                                               "grids have a block row per head)");
  if (q.batch > kMaxGridYZ)
    return make_error(FA3_ERR_UNSUPPORTED, "q->batch (" + num(q.batch) +
                                               ") must be at most 65535 for fa3_backward (its "
                                               "grids have a block layer per batch entry)");
  const Int128 ctas = static_cast<Int128>((k.seqlen + kSmallestKeyBlock - 1) / kSmallestKeyBlock) *
                      k.heads * k.batch;
  if (ctas > INT32_MAX)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "k->batch * k->heads * ceil(k->seqlen / " + num(kSmallestKeyBlock) +
                          ") = " + num(static_cast<int64_t>(std::min<Int128>(ctas, INT64_MAX))) +
                          " exceeds the 2^31 - 1 CTAs of fa3_backward's main grid");
  return Error::ok();
}

// backward_workspace's layout in any integer type: Int128 to check a shape before its sizes
// may wrap, size_t for a checked problem.
template <class Int>
WorkspaceRegions<Int> workspace_regions(int64_t batch, int64_t heads, int64_t seqlen_q,
                                        int64_t head_dim, int64_t heads_kv, int64_t seqlen_k,
                                        bool split) {
  const auto align_up = [](Int x) {
    return (x + Int{kWorkspaceAlignment} - 1) / Int{kWorkspaceAlignment} * Int{kWorkspaceAlignment};
  };
  const Int rows = static_cast<Int>(batch) * static_cast<Int>(heads) *
                   static_cast<Int>(backward_rows(seqlen_q));
  WorkspaceRegions<Int> w;
  w.lse_log2 = 0;
  w.dpsum = align_up(w.lse_log2 + rows * sizeof(float));
  w.dq_accum = align_up(w.dpsum + rows * sizeof(float));
  w.dq_semaphore = align_up(w.dq_accum + rows * static_cast<Int>(head_dim) * sizeof(float));
  w.tile_counter = w.dq_semaphore + rows / Int{kWorkspaceSemaphoreRows} * sizeof(int32_t);
  const Int tiles = static_cast<Int>(batch) * static_cast<Int>(heads_kv) *
                    static_cast<Int>((seqlen_k + kSplitTileKeys - 1) / kSplitTileKeys);
  const auto at_most = [](Int a, Int b) { return a < b ? a : b; };
  w.split_slots = split ? at_most(3 * tiles, Int{2 * kSplitMaxCtas}) : Int{0};
  w.split_tiles = split ? at_most(tiles, Int{kSplitMaxCtas}) : Int{0};
  w.dkv_partial = align_up(w.tile_counter + sizeof(uint32_t));
  w.split_counters = align_up(w.dkv_partial + w.split_slots * 2 * Int{kSplitTileKeys} *
                                                  static_cast<Int>(head_dim) * sizeof(float));
  w.total = w.split_slots > 0 ? w.split_counters + w.split_tiles * sizeof(int32_t)
                              : w.tile_counter + sizeof(uint32_t);
  return w;
}

// Whether a problem's workspace has the split last wave's regions (WorkspaceRegions): a
// default-mode non-causal call of a key some compiled kernel splits.
bool has_split_regions(const BackwardProblem& prob) {
  return !prob.causal && !prob.deterministic && backward_key_splits(prob.dtype, prob.head_dim);
}

}  // namespace

bool backward_key_splits(DType dtype, int64_t head_dim) {
  for (const KernelInfo& kernel : compiled_backward_kernels()) {
    const BwdConfig& c = kernel.bwd;
    if (c.dtype == dtype && c.head_dim == head_dim && backward_kernel_splits(c)) return true;
  }
  return false;
}

BackwardWorkspace backward_workspace(const BackwardProblem& prob) {
  return workspace_regions<size_t>(prob.batch, prob.heads, prob.seqlen_q, prob.head_dim,
                                   prob.heads_kv, prob.seqlen_k, has_split_regions(prob));
}

bool bwd_config_fits(const BwdConfig& c, const BackwardProblem& problem) {
  return c.dtype == problem.dtype && c.head_dim == problem.head_dim && c.causal == problem.causal;
}

Error select_backward_kernel(const std::vector<KernelInfo>& kernels, const BackwardProblem& prob,
                             const KernelInfo** out) {
  for (const KernelInfo& kernel : kernels)
    if (kernel.direction == Direction::Backward && bwd_config_fits(kernel.bwd, prob)) {
      *out = &kernel;
      return Error::ok();
    }
  return make_error(FA3_ERR_UNSUPPORTED,
                    "no backward kernel for this problem (" + problem_text(prob) +
                        ") is compiled into this library");
}

Error select_backward_kernel(const TuningTable& table, const std::vector<KernelInfo>& kernels,
                             const BackwardProblem& prob, const KernelInfo** out) {
  const KernelInfo* pick = table.select({Direction::Backward, prob.dtype, prob.head_dim,
                                         prob.causal, prob.seqlen_q, prob.seqlen_k});
  if (!pick) return select_backward_kernel(kernels, prob, out);
  // The entry of `kernels` (the library's list), not the table's copy: a kernel is then loaded
  // once per context whether the table or fa3_backward_with_kernel names it.
  for (const KernelInfo& kernel : kernels)
    if (kernel.name == pick->name) {
      *out = &kernel;
      return Error::ok();
    }
  return make_error(FA3_ERR_INTERNAL, "the tuning table's kernel " + pick->name +
                                          " is not in the compiled backward kernels (a validated "
                                          "table names compiled kernels only; this is a bug)");
}

Error check_backward_inputs(const fa3_tensor* q, const fa3_tensor* k, const fa3_params* p,
                            BackwardProblem* out) {
  Error e = check_present(q, "q");
  if (!e.failed()) e = check_present(k, "k");
  if (e.failed()) return e;

  if (q->dtype == FA3_E4M3)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "q->dtype is FA3_E4M3: fa3_backward takes FA3_F16 or FA3_BF16 tensors");
  if (q->dtype != FA3_F16 && q->dtype != FA3_BF16)
    return invalid(std::string("q->dtype must be FA3_F16 or FA3_BF16 (got ") +
                   dtype_text(q->dtype) + ")");
  e = check_dtype(*k, "k", *q);
  if (!e.failed()) e = check_sizes(*q, "q");
  if (!e.failed()) e = check_sizes(*k, "k");
  if (e.failed()) return e;
  if (q->head_dim != 64 && q->head_dim != 128 && q->head_dim != 256)
    return make_error(FA3_ERR_UNSUPPORTED, "q->head_dim must be 64, 128 or 256 for fa3_backward (got " +
                                               num(q->head_dim) + ")");
  e = check_same("head_dim", "k", k->head_dim, "q", q->head_dim);
  if (!e.failed()) e = check_same("batch", "k", k->batch, "q", q->batch);
  if (e.failed()) return e;
  if (q->heads % k->heads != 0)
    return invalid("q->heads (" + num(q->heads) + ") must be a multiple of k->heads (" +
                   num(k->heads) + ") (grouped-query attention)");
  e = check_layout(*q, "q", 2);
  if (!e.failed()) e = check_layout(*k, "k", 2);
  if (!e.failed()) e = check_seqlen_for_blocks(*q, "q", "fa3_backward");
  if (!e.failed()) e = check_seqlen_for_blocks(*k, "k", "fa3_backward");
  if (!e.failed()) e = check_grid(*q, *k);
  if (e.failed()) return e;
  // (With the split last wave's regions, which a non-causal call may have: an upper bound, so
  // that the check need not know the compiled kernels.)
  const Int128 workspace = workspace_regions<Int128>(q->batch, q->heads, q->seqlen, q->head_dim,
                                                     k->heads, k->seqlen, true)
                               .total;
  if (workspace > kMaxWorkspaceBytes)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "q's batch * heads * seqlen * head_dim would need about " +
                          num(static_cast<int64_t>(std::min<Int128>(workspace >> 30, INT64_MAX))) +
                          " GiB of fp32 workspace, past the 2^63 bytes fa3_backward can "
                          "address");

  BackwardProblem prob;
  e = check_attention_params(p, q->head_dim, &prob.causal, &prob.softmax_scale);
  if (e.failed()) return e;
  if (p != nullptr && p->deterministic != 0 && p->deterministic != 1)
    return invalid("p->deterministic must be 0 or 1 (got " + num(p->deterministic) + ")");
  prob.deterministic = p != nullptr && p->deterministic == 1;
  set_problem_shape(*q, *k, &prob);
  *out = prob;
  return Error::ok();
}

Error check_backward(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                     const fa3_tensor* o, const fa3_tensor* dout, const float* lse,
                     const fa3_tensor* dq, const fa3_tensor* dk, const fa3_tensor* dv,
                     const fa3_params* p, BackwardProblem* out) {
  BackwardProblem prob;
  Error e = check_backward_inputs(q, k, p, &prob);
  if (e.failed()) return e;

  // v, o and dout: read by the kernels (v and dout through TMA, o in element pairs).
  e = check_present(v, "v");
  if (!e.failed()) e = check_dtype(*v, "v", *q);
  if (!e.failed()) e = check_sizes(*v, "v");
  if (!e.failed()) e = check_shape(*v, "v", *k, "k");
  if (!e.failed()) e = check_layout(*v, "v", 2);
  if (!e.failed()) e = check_present(o, "o");
  if (!e.failed()) e = check_dtype(*o, "o", *q);
  if (!e.failed()) e = check_sizes(*o, "o");
  if (!e.failed()) e = check_shape(*o, "o", *q, "q");
  if (!e.failed()) e = check_pair_layout(*o, "o");
  if (!e.failed()) e = check_present(dout, "dout");
  if (!e.failed()) e = check_dtype(*dout, "dout", *q);
  if (!e.failed()) e = check_sizes(*dout, "dout");
  if (!e.failed()) e = check_shape(*dout, "dout", *o, "o");
  if (!e.failed()) e = check_layout(*dout, "dout", 2);
  if (e.failed()) return e;
  if (!lse)
    return invalid("lse is NULL: fa3_backward needs the (batch, heads, seqlen_q) fp32 LSE that fa3_forward wrote for o");
  if (reinterpret_cast<uintptr_t>(lse) % 4 != 0)
    return invalid("lse (" + pointer_text(lse) + ") must be 4-byte aligned (fp32)");

  // dq, dk and dv: written in element pairs, each element once.
  const fa3_tensor* outputs[] = {dq, dk, dv};
  const char* output_names[] = {"dq", "dk", "dv"};
  const fa3_tensor* shaped_like[] = {q, k, v};
  const char* shaped_like_names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    const char* name = output_names[i];
    e = check_present(outputs[i], name);
    if (!e.failed()) e = check_dtype(*outputs[i], name, *q);
    if (!e.failed()) e = check_sizes(*outputs[i], name);
    if (!e.failed()) e = check_shape(*outputs[i], name, *shaped_like[i], shaped_like_names[i]);
    if (!e.failed()) e = check_pair_layout(*outputs[i], name);
    if (!e.failed()) e = check_no_self_overlap(*outputs[i], name);
    if (e.failed()) return e;
  }

  const fa3_tensor lse_row = as_row(lse, lse_bytes(*q));
  const fa3_tensor* inputs[] = {q, k, v, o, dout, &lse_row};
  const char* input_names[] = {"q", "k", "v", "o", "dout", "lse"};
  const char* rule = "dq, dk and dv must not share memory with an input or with each other";
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 6; ++j) {
      const Sharing s = element_sharing(*outputs[i], *inputs[j]);
      if (s != Sharing::None) return sharing_error(s, output_names[i], input_names[j], rule);
    }
    for (int j = 0; j < i; ++j) {
      const Sharing s = element_sharing(*outputs[i], *outputs[j]);
      if (s != Sharing::None) return sharing_error(s, output_names[i], output_names[j], rule);
    }
  }
  *out = prob;
  return Error::ok();
}

Error check_backward_workspace(const BackwardProblem& prob, const void* workspace,
                               size_t workspace_bytes, const fa3_tensor* q, const fa3_tensor* k,
                               const fa3_tensor* v, const fa3_tensor* o, const fa3_tensor* dout,
                               const float* lse, const fa3_tensor* dq, const fa3_tensor* dk,
                               const fa3_tensor* dv) {
  if (!workspace) return Error::ok();
  const size_t needed = backward_workspace(prob).total;
  if (reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment != 0)
    return invalid("workspace (" + pointer_text(workspace) + ") must be 256-byte aligned");
  if (workspace_bytes < needed)
    return invalid("workspace_bytes (" + std::to_string(workspace_bytes) + ") is less than the " +
                   std::to_string(needed) +
                   " bytes this problem needs (fa3_backward_workspace_size)");
  // The kernels write all of it: nothing else may live there.
  const fa3_tensor region = as_row(workspace, needed);
  const fa3_tensor lse_row = as_row(lse, lse_bytes(*q));
  const fa3_tensor* tensors[] = {q, k, v, o, dout, &lse_row, dq, dk, dv};
  const char* names[] = {"q", "k", "v", "o", "dout", "lse", "dq", "dk", "dv"};
  for (int i = 0; i < 9; ++i) {
    const Sharing s = element_sharing(region, *tensors[i]);
    if (s != Sharing::None)
      return sharing_error(s, "workspace", names[i],
                           "the workspace must not share memory with a tensor or lse");
  }
  return Error::ok();
}

}  // namespace fa3
