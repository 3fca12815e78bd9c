// Attention references on the host, for tests and the benchmark's --check.
//
// - reference_row: float64 arithmetic on the exact input values (the truth we measure
//   errors against).
// - plain_row: a "plain same-precision" attention, as a framework computes it in the input
//   precision: S = QK^T accumulated in fp32 and rounded to the 16-bit type, softmax in fp32,
//   P rounded to the 16-bit type, O = PV accumulated in fp32, rounded to the 16-bit type.
//   The FlashAttention error rule compares our error against this one's.
//
// Inputs are float arrays holding the exact values of the 16-bit tensors, in the logical
// layout (batch, seqlen, heads, head_dim), contiguous.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace fa3test {

struct AttentionShape {
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads = 1, heads_kv = 1, head_dim = 64;
  bool causal = false;
  double scale = 0;  // 0: 1/sqrt(head_dim)
  double effective_scale() const;
  // Causal, bottom-right aligned: query i sees keys j <= i + seqlen_k - seqlen_q.
  int64_t last_key(int64_t i) const;  // exclusive end of the keys row i sees (<= 0: none)
};

// O row (head_dim values) and LSE of query row i of (batch b, head h). A row with nothing to
// attend gets O = 0 and LSE = -inf.
void reference_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                   int64_t b, int64_t h, int64_t i, double* o, double* lse);
void plain_row(const AttentionShape& s, const float* q, const float* k, const float* v,
               int64_t b, int64_t h, int64_t i, bool is_bf16, float* o, float* lse);

// Runs fn(index) for index in [0, n) on all hardware threads.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace fa3test
