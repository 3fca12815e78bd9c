// The check of --direction bwd / fwdbwd: dQ, dK and dV against a float64 host reference
// (test/support/reference.h, paper Algorithm 3 in double) on sampled rows, each judged by the
// FlashAttention rule of the forward's check (check.h): our max error <= 2 x the max error of
// the plain same-precision backward (16-bit S, P, dP, dS and outputs, fp32 accumulation) on
// the same entries + 1e-5. Pure host code: the runner copies the gradients back and hands
// them over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "problems.h"

namespace fa3bench {

// What is checked. A dK/dV row needs the statistics (LSE, D = rowsum(dO * O)) of every query
// row of its (batch, K/V head) group, i.e. a forward pass over the group on the host: so the
// check covers whole groups, a few of them on large problems, and in each group the dQ rows
// of every query head at query_rows and the dK and dV rows at key_rows. Under GQA a group's
// dK and dV are sums over its query heads, which the reference sums the same way.
struct BackwardSample {
  struct Group {
    int64_t batch = 0, kv_head = 0;
    bool operator==(const Group& o) const { return batch == o.batch && kv_head == o.kv_head; }
  };
  std::vector<Group> groups;        // in (batch, kv_head) order, no duplicates
  std::vector<int64_t> query_rows;  // increasing positions in [0, seqlen_q)
  std::vector<int64_t> key_rows;    // increasing positions in [0, seqlen_k)
};

// Every position when a sequence is this long or shorter, else kBackwardSampledPositions
// positions spread evenly from the first to the last (the boundaries, where the causal mask
// and the tail blocks live, are always in).
constexpr int64_t kBackwardAllPositionsUpTo = 256;
constexpr int64_t kBackwardSampledPositions = 128;
// Groups: as many as fit in kBackwardReferenceBudget multiply-adds of the host's group passes
// (one group costs (heads / kv_heads) x the unmasked (i, j) pairs x head_dim; the float64 and
// the plain reference together ran ~1.5e8 of them a second per core on a 2-core host, so 2^33
// is ~4 s on 16 cores), at least 1 and at most kBackwardMaxGroups, spread from the first
// (batch, K/V head) to the last. One group of the 16k d128 problem is 4x the budget (~15 s).
constexpr double kBackwardReferenceBudget = 8589934592.0;  // 2^33
constexpr int64_t kBackwardMaxGroups = 4;

BackwardSample sample_backward(const Problem& p);

// Reference values of the sampled rows, computed once per problem.
struct BackwardReference {
  BackwardSample sample;
  // dq: for each group, each query head of the group (in head order) and each of query_rows,
  // head_dim values; dk, dv: for each group and each of key_rows, head_dim values.
  std::vector<double> dq, dk, dv;
  // max |plain - reference| over the same entries, per gradient.
  double plain_dq_error = 0, plain_dk_error = 0, plain_dv_error = 0;
};

// q, k, v, dout: the exact values of the inputs, (batch, seqlen, heads, head_dim) contiguous
// (dout like q). On all hardware threads.
BackwardReference compute_backward_reference(const Problem& p, const float* q, const float* k,
                                             const float* v, const float* dout);

struct BackwardCheckResult {
  double dq_error = 0, dk_error = 0, dv_error = 0;  // max |ours - reference| (abs_error)
  double plain_dq_error = 0, plain_dk_error = 0, plain_dv_error = 0;
  bool pass = false;
  // Empty when pass; otherwise which gradient broke which rule, in one phrase for the FAIL
  // line ("dk error 3.1e-02 > 2 x plain 1.0e-02 + 1e-5").
  std::string failure;
};

// dq: (batch, seqlen_q, heads, head_dim), dk and dv: (batch, seqlen_k, kv_heads, head_dim), as
// 16-bit values of p.dtype, whole and contiguous.
BackwardCheckResult compare_backward(const Problem& p, const BackwardReference& ref,
                                     const uint16_t* dq, const uint16_t* dk, const uint16_t* dv);

}  // namespace fa3bench
