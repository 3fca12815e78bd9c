// --check: our output against a float64 host reference on sampled rows, judged by the
// FlashAttention error rule (our error <= 2 x the plain same-precision attention's error
// + 1e-5). Pure host code: the runner copies O and LSE back and hands them over.
#pragma once

#include <cstdint>
#include <vector>

#include "problems.h"
#include "support/reference.h"

namespace fa3bench {

struct RowIndex {
  int64_t batch = 0, head = 0, row = 0;  // row: query position in [0, seqlen_q)
  bool operator<(const RowIndex& o) const;
  bool operator==(const RowIndex& o) const;
};

constexpr int64_t kCheckAllRowsUpTo = 4096;  // B*H*Sq up to this: every row is checked
constexpr int64_t kSampledRows = 512;        // otherwise this many, spread out

// Every query row when batch*heads*seqlen_q <= kCheckAllRowsUpTo, else kSampledRows rows:
// one in four is the first or the last row of a sequence (in (batch, head) pairs spread
// evenly over all of them), the rest sit at positions spread evenly over the sequence in
// pseudo-random (batch, head) pairs. Sorted, no duplicates (so a little under kSampledRows).
std::vector<RowIndex> sample_rows(const Problem& p);

fa3test::AttentionShape attention_shape(const Problem& p);

// Reference values of the sampled rows, computed once per problem and compared with every
// kernel (and the baseline) that runs it.
struct Reference {
  std::vector<RowIndex> rows;
  std::vector<double> o;    // rows.size() x head_dim, float64 reference_row
  std::vector<double> lse;  // rows.size()
  double plain_o_error = 0;    // max |plain_row - reference| over the rows' O values
  double plain_lse_error = 0;  // the same for LSE
};

// q, k, v: the exact values of the inputs, (batch, seqlen, heads, head_dim) contiguous.
Reference compute_reference(const Problem& p, const float* q, const float* k, const float* v);

struct CheckResult {
  double o_error = 0;    // max |ours - reference| over the sampled rows' O values
  double lse_error = 0;  // the same for LSE (when has_lse)
  double plain_o_error = 0, plain_lse_error = 0;
  bool has_lse = false;
  bool pass = false;
};

// |ours - reference|, +inf when ours is NaN or when exactly one of them is infinite (a row
// with nothing to attend must give LSE = -inf), 0 when both are the same infinity.
double abs_error(double ours, double reference);
// The FlashAttention rule: ours <= 2 * plain + 1e-5 (NaN fails, as does a plain error that is
// not finite).
bool within_error_rule(double ours, double plain);
// The LSE's rule: within kLseBound of float64 (natural log), in every dtype. It is not held to
// the plain same-precision attention, whose LSE shares the 16-bit rounding this must exclude:
// the backward recomputes P = exp(S - LSE) from it.
constexpr double kLseBound = 1e-4;
bool lse_within_bound(double ours);

// o: the whole output (batch, seqlen_q, heads, head_dim) as 16-bit values of p.dtype;
// lse: (batch, heads, seqlen_q) fp32, or nullptr when there is none to check (baseline).
CheckResult compare_with_reference(const Problem& p, const Reference& ref, const uint16_t* o,
                                   const float* lse);

}  // namespace fa3bench
