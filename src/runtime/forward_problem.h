// Argument checks of fa3_forward and the problem they describe. Pure host code: runs and is
// tested without a GPU. Every rule an argument can break has its own sentence naming it.
#pragma once

#include <cstdint>

#include "fa3/fa3.h"
#include "kernels/fwd_config.h"
#include "runtime/error.h"
#include "runtime/tensor_rules.h"

namespace fa3 {

struct ForwardProblem {
  DType dtype = DType::BF16;
  int head_dim = 0;
  bool causal = false;
  float softmax_scale = 0;  // the effective scale (p->softmax_scale or 1/sqrt(head_dim))
  int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads = 0, heads_kv = 0;
};

// Checks q, k, v and p alone (what choosing a kernel needs).
Error check_forward_inputs(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                           const fa3_params* p, ForwardProblem* out);

// Checks q, k, v, o, lse and p (o and lse are only inspected, never written). `p` may be NULL
// (defaults). On success fills *out.
Error check_forward(const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                    const fa3_tensor* o, const float* lse, const fa3_params* p,
                    ForwardProblem* out);

// Whether a compiled forward kernel can run this problem (dtype, head_dim, causal).
bool fwd_config_fits(const FwdConfig& c, const ForwardProblem& problem);

}  // namespace fa3
