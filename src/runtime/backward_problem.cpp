#include "runtime/backward_problem.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/forward_problem.h"

namespace fa3 {

using namespace tensor_rules;

namespace {

// The kernels index rows with 32-bit integers, also after rounding a sequence up to whole
// blocks: 2^31 - 128 is a multiple of every block size (64, 80 and 128 rows or keys), so no
// rounding of a length up to it passes 2^31 - 1.
constexpr int64_t kMaxBackwardSeqlen = 2147483647 - 127;

// The smallest block_n of a backward kernel (the _kvh kernels' 64; the others' 80 or 128): the
// main grid's CTA count is largest with it.
constexpr int64_t kSmallestKeyBlock = 64;

// fa3_backward_workspace_size reports a size_t; a workspace of 2^63 bytes or more is no
// allocation a device can make, and its offsets would wrap.
constexpr Int128 kMaxWorkspaceBytes = static_cast<Int128>(INT64_MAX);

Int128 address(const void* p) { return static_cast<Int128>(reinterpret_cast<uintptr_t>(p)); }

// o, dq, dk and dv may not be TMA tensors (dk and dv go by TMA only where their layout
// allows it, o is read 16 bytes at a time only where aligned): the kernels' fallback reads
// and writes them as pairs of elements (32-bit accesses), so a pair must never straddle a
// 4-byte boundary.
Error check_pair_layout(const fa3_tensor& t, const char* name) {
  if (reinterpret_cast<uintptr_t>(t.data) % 4 != 0)
    return invalid(std::string(name) + "->data (" + pointer_text(t.data) +
                   ") must be 4-byte aligned (the kernels access element pairs)");
  for (const Dim& d : outer_dims(t)) {
    if (d.size == 1) continue;
    const std::string field = std::string(name) + "->" + d.stride_name;
    if (d.stride <= 0)
      return invalid(field + " must be positive when " + name + "->" + d.name + " > 1 (got " +
                     num(d.stride) + ")");
    if (d.stride % 2 != 0)
      return invalid(field + " (" + num(d.stride) +
                     ") must be even (the kernels access element pairs)");
  }
  if (byte_range(t, 2).last >= (static_cast<Int128>(1) << 64))
    return invalid(std::string(name) + " extends past the end of the address space (its sizes and strides overflow 64-bit addresses)");
  return Error::ok();
}

Error check_seqlen_for_blocks(const fa3_tensor& t, const char* name) {
  if (t.seqlen <= kMaxBackwardSeqlen) return Error::ok();
  return invalid(std::string(name) + "->seqlen must be at most " + num(kMaxBackwardSeqlen) +
                 " for fa3_backward (got " + num(t.seqlen) +
                 "): rounded up to whole blocks it must stay below 2^31");
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
WorkspaceRegions<Int> workspace_regions(int64_t batch, int64_t heads, int64_t heads_kv,
                                        int64_t seqlen_q, int64_t head_dim) {
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
  w.pair_done = w.tile_counter + sizeof(uint32_t);
  w.total = w.pair_done + static_cast<Int>(batch) * static_cast<Int>(heads_kv) * sizeof(int32_t);
  return w;
}

// A contiguous byte buffer as a tensor of 2-byte elements (one row), for element_sharing.
fa3_tensor as_row(const void* data, Int128 bytes) {
  fa3_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = FA3_F16;
  t.batch = t.seqlen = t.heads = 1;
  t.head_dim = static_cast<int64_t>(bytes / 2);
  return t;
}

Error sharing_error(Sharing s, const char* a, const char* b, const char* rule) {
  if (s == Sharing::Some)
    return invalid(std::string(a) + " overlaps " + b + " in memory: " + rule);
  return invalid(std::string(a) + " and " + b +
                 " may share memory: their byte ranges interleave, and fa3 tells elements apart "
                 "only for views with the same strides (such as views of one packed buffer); " +
                 rule);
}

Int128 floor_div(Int128 a, Int128 b) {  // b > 0
  Int128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}
Int128 ceil_div(Int128 a, Int128 b) { return -floor_div(-a, b); }

struct Axis {
  Int128 stride;
  int64_t a_size, b_size;
};

// Innermost (smallest stride) first; at most three axes.
void sort_by_stride(Axis* axes, int count) {
  for (int i = 1; i < count; ++i)
    for (int j = i; j > 0 && axes[j].stride < axes[j - 1].stride; --j)
      std::swap(axes[j], axes[j - 1]);
}

// Whether delta = sum over axes 0..level of y_i * stride_i + e has a solution with y_i in
// [-(b_size - 1), a_size - 1] and the rest in [lowest[level], highest[level]] (see
// element_sharing). Each axis admits the y whose remainder fits below it; where the strides
// nest (each one at least the extent inside it) those are at most two.
Sharing solve(const Axis* axes, const Int128* lowest, const Int128* highest, int level,
              Int128 delta) {
  if (level < 0) return lowest[0] <= delta && delta <= highest[0] ? Sharing::Some : Sharing::None;
  const Axis& a = axes[level];
  const Int128 y_min =
      std::max<Int128>(-(a.b_size - 1), ceil_div(delta - highest[level], a.stride));
  const Int128 y_max =
      std::min<Int128>(a.a_size - 1, floor_div(delta - lowest[level], a.stride));
  if (y_max - y_min + 1 > 4) return Sharing::Unknown;
  Sharing result = Sharing::None;
  for (Int128 y = y_min; y <= y_max; ++y) {
    const Sharing s = solve(axes, lowest, highest, level - 1, delta - y * a.stride);
    if (s == Sharing::Some) return s;
    if (s == Sharing::Unknown) result = s;
  }
  return result;
}

// The dimensions of `t` that step (size > 1), innermost first; false when they do not nest
// (a stride below the extent of what lies inside it: elements may repeat).
bool nested_axes(const fa3_tensor& t, Axis* axes, int* count) {
  *count = 0;
  for (const Dim& d : outer_dims(t))
    if (d.size > 1) axes[(*count)++] = {d.stride, d.size, d.size};
  sort_by_stride(axes, *count);
  Int128 extent = t.head_dim;
  for (int i = 0; i < *count; ++i) {
    if (axes[i].stride < extent) return false;
    extent += static_cast<Int128>(axes[i].a_size - 1) * axes[i].stride;
  }
  return true;
}

// The smallest element offset >= x of a tensor with nested axes 0..level (head_dim columns
// innermost), or -1 when there is none. Along a nested axis, the elements at y * stride + (the
// inner ones) all lie below (y + 1) * stride, so the first candidate is in block floor(x /
// stride), else at the start of the next block.
Int128 next_element(const Axis* axes, int level, int64_t head_dim, Int128 x) {
  if (x <= 0) return 0;
  if (level < 0) return x < head_dim ? x : -1;
  const Axis& a = axes[level];
  const Int128 y = std::min<Int128>(x / a.stride, a.a_size - 1);
  const Int128 inner = next_element(axes, level - 1, head_dim, x - y * a.stride);
  if (inner >= 0) return y * a.stride + inner;
  return y + 1 < a.a_size ? (y + 1) * a.stride : -1;
}

}  // namespace

Sharing element_sharing(const fa3_tensor& a, const fa3_tensor& b) {
  if (!overlaps(byte_range(a, 2), byte_range(b, 2))) return Sharing::None;
  const Int128 delta_bytes = address(b.data) - address(a.data);
  if (delta_bytes % 2 != 0) return Sharing::Unknown;
  // One of them a single run of elements (lse, a workspace, one row): whether the other has an
  // element inside it, exactly when the other's dimensions nest.
  const bool a_is_run = a.batch == 1 && a.seqlen == 1 && a.heads == 1;
  const bool b_is_run = b.batch == 1 && b.seqlen == 1 && b.heads == 1;
  if (a_is_run || b_is_run) {
    const fa3_tensor& run = a_is_run ? a : b;
    const fa3_tensor& other = a_is_run ? b : a;
    Axis nested[3];
    int levels = 0;
    if (nested_axes(other, nested, &levels)) {
      const Int128 start = (address(run.data) - address(other.data)) / 2;  // in other's elements
      const Int128 next = next_element(nested, levels - 1, other.head_dim, start);
      return next >= 0 && next < start + run.head_dim ? Sharing::Some : Sharing::None;
    }
  }
  // Element (x, c) of a (x: batch, seq, head indices; c: column) sits at sum x_i s_i + c from
  // a.data, element (x', c') of b at delta + sum x'_i s_i + c'. They coincide when delta =
  // sum y_i s_i + e, with y_i = x_i - x'_i and e = c - c' in [-(b.head_dim - 1), a.head_dim - 1].
  Axis axes[3];
  int count = 0;
  const auto da = outer_dims(a), db = outer_dims(b);
  for (int i = 0; i < 3; ++i) {
    if (da[i].size == 1 && db[i].size == 1) continue;
    if (da[i].size > 1 && db[i].size > 1 && da[i].stride != db[i].stride) return Sharing::Unknown;
    axes[count++] = {da[i].size > 1 ? da[i].stride : db[i].stride, da[i].size, db[i].size};
  }
  sort_by_stride(axes, count);
  // lowest[i], highest[i]: what the axes below i and the columns can add up to.
  Int128 lowest[4], highest[4];
  lowest[0] = -(b.head_dim - 1);
  highest[0] = a.head_dim - 1;
  for (int i = 0; i < count; ++i) {
    lowest[i + 1] = lowest[i] - static_cast<Int128>(axes[i].b_size - 1) * axes[i].stride;
    highest[i + 1] = highest[i] + static_cast<Int128>(axes[i].a_size - 1) * axes[i].stride;
  }
  return solve(axes, lowest, highest, count - 1, delta_bytes / 2);
}

BackwardWorkspace backward_workspace(const BackwardProblem& prob) {
  return workspace_regions<size_t>(prob.batch, prob.heads, prob.heads_kv, prob.seqlen_q,
                                   prob.head_dim);
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
  *out = pick;
  return Error::ok();
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
  if (!e.failed()) e = check_seqlen_for_blocks(*q, "q");
  if (!e.failed()) e = check_seqlen_for_blocks(*k, "k");
  if (!e.failed()) e = check_grid(*q, *k);
  if (e.failed()) return e;
  const Int128 workspace =
      workspace_regions<Int128>(q->batch, q->heads, k->heads, q->seqlen, q->head_dim).total;
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
