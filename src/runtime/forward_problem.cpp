#include "runtime/forward_problem.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

namespace fa3 {

namespace tensor_rules {

Error invalid(const std::string& message) { return make_error(FA3_ERR_INVALID_ARGUMENT, message); }

std::string num(int64_t v) { return std::to_string(v); }

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

const char* dtype_text(fa3_dtype d) {
  switch (d) {
    case FA3_F16: return "FA3_F16";
    case FA3_BF16: return "FA3_BF16";
    case FA3_E4M3: return "FA3_E4M3";
    case FA3_F32: return "FA3_F32";
  }
  return "an unknown dtype";
}

std::array<Dim, 3> outer_dims(const fa3_tensor& t) {
  return {{{"batch", t.batch, t.stride_batch, "stride_batch"},
          {"seqlen", t.seqlen, t.stride_seq, "stride_seq"},
          {"heads", t.heads, t.stride_head, "stride_head"}}};
}

ByteRange byte_range(const fa3_tensor& t, int64_t element_bytes) {
  Int128 last = t.head_dim - 1;
  for (const Dim& d : outer_dims(t)) last += static_cast<Int128>(d.size - 1) * d.stride;
  const Int128 base = static_cast<Int128>(reinterpret_cast<uintptr_t>(t.data));
  return {base, base + last * element_bytes + element_bytes - 1};
}
bool overlaps(const ByteRange& a, const ByteRange& b) { return a.first <= b.last && b.first <= a.last; }

Error check_sizes(const fa3_tensor& t, const char* name) {
  for (const Dim& d : outer_dims(t)) {
    if (d.size < 1)
      return invalid(std::string(name) + "->" + d.name + " must be >= 1 (got " + num(d.size) + ")");
    if (d.size > kMaxExtent)
      return invalid(std::string(name) + "->" + d.name + " must be at most 2147483647 (got " +
                     num(d.size) + ")");
  }
  return Error::ok();
}

Error check_layout(const fa3_tensor& t, const char* name, int64_t element_bytes) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return invalid(std::string(name) + "->data (" + pointer_text(t.data) +
                   ") must be 16-byte aligned (TMA)");
  for (const Dim& d : outer_dims(t)) {
    if (d.size == 1) continue;
    const std::string field = std::string(name) + "->" + d.stride_name;
    if (d.stride <= 0)
      return invalid(field + " must be positive when " + name + "->" + d.name + " > 1 (got " +
                     num(d.stride) + ")");
    const Int128 bytes = static_cast<Int128>(d.stride) * element_bytes;
    if (bytes % 16 != 0)
      return invalid(field + " (" + num(d.stride) + " elements = " +
                     num(static_cast<int64_t>(bytes)) +
                     " bytes) must be a multiple of 16 bytes (TMA)");
    if (bytes >= (static_cast<Int128>(1) << 40))
      return invalid(field + " (" + num(d.stride) + " elements) must be below 2^40 bytes (TMA)");
  }
  const ByteRange r = byte_range(t, element_bytes);
  if (r.last >= (static_cast<Int128>(1) << 64))
    return invalid(std::string(name) + " extends past the end of the address space (its sizes and strides overflow 64-bit addresses)");
  return Error::ok();
}

// Sorting the dimensions of size > 1 by stride, each stride must reach past the
// extent of the dimensions inside it: from their first element to their last, stride *
// (size - 1) of each plus head_dim (not stride * size, which would refuse a dimension that
// fits in the padding of the one outside it).
Error check_no_self_overlap(const fa3_tensor& t, const char* name) {
  std::array<Dim, 3> dims = outer_dims(t);
  // Dimensions of size 1 never step: sort them out of the way (stride "infinite").
  std::sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) {
    if ((a.size > 1) != (b.size > 1)) return a.size > 1;
    return a.stride < b.stride;
  });
  Int128 extent = t.head_dim;  // elements covered by the dimensions inside the current one
  const char* inner = "head_dim";
  for (const Dim& d : dims) {
    if (d.size == 1) break;
    if (static_cast<Int128>(d.stride) < extent)
      return invalid(std::string(name) + "->" + d.stride_name + " (" + num(d.stride) +
                     ") is smaller than the extent of " + name + "'s " + inner +
                     " dimension(s) (" + num(static_cast<int64_t>(extent)) +
                     " elements): different elements of the output would share memory");
    extent += static_cast<Int128>(d.stride) * (d.size - 1);
    inner = d.name;
  }
  return Error::ok();
}

Error check_attention_params(const fa3_params* p, int64_t head_dim, bool* causal, float* scale) {
  if (p == nullptr) {
    *causal = false;
    *scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    return Error::ok();
  }
  if (p->causal != 0 && p->causal != 1)
    return invalid("p->causal must be 0 or 1 (got " + num(p->causal) + ")");
  if (!(p->softmax_scale >= 0.0f) || std::isinf(p->softmax_scale))
    return invalid("p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got " +
                   std::to_string(p->softmax_scale) + ")");
  *causal = p->causal == 1;
  *scale = p->softmax_scale != 0.0f
               ? p->softmax_scale
               : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return Error::ok();
}

Error check_same(const char* field, const char* t_name, int64_t t_value, const char* ref_name,
                 int64_t ref_value) {
  if (t_value == ref_value) return Error::ok();
  return invalid(std::string(t_name) + "->" + field + " (" + num(t_value) + ") must equal " +
                 ref_name + "->" + field + " (" + num(ref_value) + ")");
}

// Each of these names the argument and the rule in its sentence.
Error check_present(const fa3_tensor* t, const char* name) {
  if (!t) return invalid(std::string(name) + " is NULL: pass a tensor descriptor");
  if (!t->data) return invalid(std::string(name) + "->data is NULL");
  return Error::ok();
}

Error check_dtype(const fa3_tensor& t, const char* name, const fa3_tensor& q) {
  if (t.dtype == q.dtype) return Error::ok();
  return invalid(std::string(name) + "->dtype (" + dtype_text(t.dtype) + ") must equal q->dtype (" +
                 dtype_text(q.dtype) + ")");
}

// batch, seqlen, heads and head_dim of `t` equal those of `ref`.
Error check_shape(const fa3_tensor& t, const char* name, const fa3_tensor& ref,
                  const char* ref_name) {
  const char* fields[] = {"batch", "seqlen", "heads", "head_dim"};
  const int64_t values[] = {t.batch, t.seqlen, t.heads, t.head_dim};
  const int64_t ref_values[] = {ref.batch, ref.seqlen, ref.heads, ref.head_dim};
  for (int i = 0; i < 4; ++i) {
    Error e = check_same(fields[i], name, values[i], ref_name, ref_values[i]);
    if (e.failed()) return e;
  }
  return Error::ok();
}

Int128 lse_bytes(const fa3_tensor& q) {
  return static_cast<Int128>(q.batch) * q.heads * q.seqlen * 4;
}

}  // namespace tensor_rules

using namespace tensor_rules;

bool fwd_config_fits(const FwdConfig& c, const ForwardProblem& problem) {
  return c.dtype == problem.dtype && c.head_dim == problem.head_dim && c.causal == problem.causal;
}

Error check_forward_inputs(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                           const fa3_params* p, ForwardProblem* out) {
  const fa3_tensor* tensors[] = {q, k, v};
  const char* names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    Error e = check_present(tensors[i], names[i]);
    if (e.failed()) return e;
  }

  if (q->dtype == FA3_E4M3)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "q->dtype is FA3_E4M3: fa3_forward takes FA3_F16 or FA3_BF16 inputs");
  if (q->dtype != FA3_F16 && q->dtype != FA3_BF16)
    return invalid(std::string("q->dtype must be FA3_F16 or FA3_BF16 (got ") + dtype_text(q->dtype) + ")");
  for (int i = 1; i < 3; ++i) {
    Error e = check_dtype(*tensors[i], names[i], *q);
    if (e.failed()) return e;
  }

  for (int i = 0; i < 3; ++i) {
    Error e = check_sizes(*tensors[i], names[i]);
    if (e.failed()) return e;
  }
  if (q->head_dim != 64 && q->head_dim != 128 && q->head_dim != 256)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "q->head_dim must be 64, 128 or 256 (got " + num(q->head_dim) + ")");
  for (int i = 1; i < 3; ++i) {
    Error e = check_same("head_dim", names[i], tensors[i]->head_dim, "q", q->head_dim);
    if (e.failed()) return e;
    e = check_same("batch", names[i], tensors[i]->batch, "q", q->batch);
    if (e.failed()) return e;
  }
  Error e = check_same("seqlen", "v", v->seqlen, "k", k->seqlen);
  if (e.failed()) return e;
  e = check_same("heads", "v", v->heads, "k", k->heads);
  if (e.failed()) return e;
  if (q->heads % k->heads != 0)
    return invalid("q->heads (" + num(q->heads) + ") must be a multiple of k->heads (" +
                   num(k->heads) + ") (grouped-query attention)");

  for (int i = 0; i < 3; ++i) {
    e = check_layout(*tensors[i], names[i], 2);
    if (e.failed()) return e;
  }

  // grid: ceil(seqlen_q / 64) query blocks at most (the smallest block_m) per (batch, head)
  const Int128 blocks = static_cast<Int128>((q->seqlen + 63) / 64) * q->heads * q->batch;
  if (blocks > kMaxExtent)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "q->batch * q->heads * ceil(q->seqlen / 64) = " +
                          num(static_cast<int64_t>(std::min<Int128>(blocks, INT64_MAX))) +
                          " exceeds the 2^31 - 1 blocks of a grid");

  ForwardProblem prob;
  e = check_attention_params(p, q->head_dim, &prob.causal, &prob.softmax_scale);
  if (e.failed()) return e;
  set_problem_shape(*q, *k, &prob);
  *out = prob;
  return Error::ok();
}

Error check_forward_outputs(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                            const fa3_tensor* o, const float* lse) {
  Error e = check_present(o, "o");
  if (!e.failed()) e = check_dtype(*o, "o", *q);
  if (!e.failed()) e = check_sizes(*o, "o");
  if (!e.failed()) e = check_shape(*o, "o", *q, "q");
  if (e.failed()) return e;
  e = check_layout(*o, "o", 2);
  if (e.failed()) return e;
  e = check_no_self_overlap(*o, "o");
  if (e.failed()) return e;
  const fa3_tensor* inputs[] = {q, k, v};
  const char* names[] = {"q", "k", "v", "o"};
  const ByteRange o_range = byte_range(*o, 2);
  for (int i = 0; i < 3; ++i)
    if (overlaps(o_range, byte_range(*inputs[i], 2)))
      return invalid(std::string("o overlaps ") + names[i] +
                     " in memory: the output must not alias an input");

  if (lse) {
    if (reinterpret_cast<uintptr_t>(lse) % 4 != 0)
      return invalid("lse (" + pointer_text(lse) + ") must be 4-byte aligned (fp32)");
    const Int128 first = static_cast<Int128>(reinterpret_cast<uintptr_t>(lse));
    const ByteRange lse_range{first, first + lse_bytes(*q) - 1};
    const fa3_tensor* all[] = {q, k, v, o};
    for (int i = 0; i < 4; ++i)
      if (overlaps(lse_range, byte_range(*all[i], 2)))
        return invalid(std::string("lse overlaps ") + names[i] +
                       " in memory: the (batch, heads, seqlen_q) fp32 LSE buffer must be separate");
  }
  return Error::ok();
}

Error check_forward(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                    const fa3_tensor* o, const float* lse, const fa3_params* p,
                    ForwardProblem* out) {
  ForwardProblem prob;
  Error e = check_forward_inputs(q, k, v, p, &prob);
  if (!e.failed()) e = check_forward_outputs(q, k, v, o, lse);
  if (!e.failed()) *out = prob;
  return e;
}

}  // namespace fa3
