#include "runtime/forward_problem.h"

#include <algorithm>
#include <string>

namespace fa3 {

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
  e = check_seqlen_for_blocks(*q, "q", "fa3_forward");
  if (!e.failed()) e = check_seqlen_for_blocks(*k, "k", "fa3_forward");
  if (e.failed()) return e;

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
  // A causal kernel finds a row's last key as row + 1 + seqlen_k - seqlen_q in 32 bits, for
  // rows up to seqlen_q rounded up to a whole block (kMaxBlockedSeqlen).
  if (prob.causal && q->seqlen + k->seqlen > kMaxBlockedSeqlen)
    return invalid("q->seqlen + k->seqlen (" + num(q->seqlen + k->seqlen) +
                   ") must be at most " + num(kMaxBlockedSeqlen) +
                   " for a causal fa3_forward: its diagonal is found in 32-bit arithmetic");
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
  // By elements, as the backward's outputs: an o interleaved with q, k and v in one packed
  // buffer shares no element with them.
  const fa3_tensor* inputs[] = {q, k, v};
  const char* names[] = {"q", "k", "v", "o"};
  for (int i = 0; i < 3; ++i) {
    const Sharing s = element_sharing(*o, *inputs[i]);
    if (s != Sharing::None)
      return sharing_error(s, "o", names[i], "the output must not alias an input");
  }

  if (lse) {
    if (reinterpret_cast<uintptr_t>(lse) % 4 != 0)
      return invalid("lse (" + pointer_text(lse) + ") must be 4-byte aligned (fp32)");
    const fa3_tensor lse_row = as_row(lse, lse_bytes(*q));
    const fa3_tensor* all[] = {q, k, v, o};
    for (int i = 0; i < 4; ++i) {
      const Sharing s = element_sharing(lse_row, *all[i]);
      if (s != Sharing::None)
        return sharing_error(s, "lse", names[i],
                             "the (batch, heads, seqlen_q) fp32 LSE buffer must be separate");
    }
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
