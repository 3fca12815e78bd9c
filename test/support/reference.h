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

// ---- Backward (paper Algorithm 3) -----------------------------------------------------------
// Gradients of the loss L = sum(O * dO) with respect to Q, K and V, for dO given:
//   P = softmax(scale S), S = Q K^T (masked), dV = P^T dO, dP = dO V^T, D = rowsum(dO * O),
//   dS = P * (dP - D), dQ = scale dS K, dK = scale dS^T Q,
// with dK and dV of a K/V head summed over the query heads of its group. A query row that sees
// no key has zero gradient and adds nothing to dK and dV. dout has q's layout.
//
// One dQ row needs its row's statistics; one dK/dV row needs those of every query row of its
// (batch, K/V head) group: the functions take them precomputed, so that sampled rows of a
// large problem cost one pass over their group (reference_group_stats) and not the problem.

// float64: the row's LSE (natural log, -inf when it sees no key) and D = dO . O.
struct BackwardRowStats {
  double lse = 0, delta = 0;
};
BackwardRowStats reference_row_stats(const AttentionShape& s, const float* q, const float* k,
                                     const float* v, const float* dout, int64_t b, int64_t h,
                                     int64_t i);
// The stats of every query row of K/V head hk's group in batch b, in (head - hk * group, i)
// order, computed on all hardware threads.
std::vector<BackwardRowStats> reference_group_stats(const AttentionShape& s, const float* q,
                                                    const float* k, const float* v,
                                                    const float* dout, int64_t b, int64_t hk);
// dQ row (head_dim values) of query row i of (b, h).
void reference_dq_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                      const float* dout, int64_t b, int64_t h, int64_t i,
                      const BackwardRowStats& stats, double* dq);
// dK and dV rows of key j of (b, K/V head hk); group_stats as reference_group_stats returns.
void reference_dkv_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const float* dout, int64_t b, int64_t hk, int64_t j,
                       const BackwardRowStats* group_stats, double* dk, double* dv);

// The plain same-precision backward, as a framework computes it in the input dtype: the
// forward of plain_row (S rounded to 16 bits, softmax in fp32, P rounded to 16 bits, O = PV in
// fp32 rounded to 16 bits), then dP = dO V^T accumulated in fp32 and rounded to 16 bits,
// D = rowsum(dO * O) in fp32 over the 16-bit O (FlashAttention's form; a framework's softmax
// backward computes sum_j P dP over the 16-bit P and dP, exact where a row sees one key, so
// that the rule's bound there would be its 1e-5 alone, below the fp32 rounding a correct
// kernel's dK sums over a thousand rows: 1.2e-5 to 7.5e-5 at seqlen_k 1, docs/perf-history.md
// v86), dS = P (dP - D) in fp32 rounded to 16 bits,
// dQ = scale dS K, dK = scale dS^T Q and dV = P^T dO accumulated in fp32 and rounded to 16
// bits. Under GQA each query head's dK and dV are rounded to 16 bits, then summed over the
// group in fp32 and rounded again (the gradient of a K/V head repeated per query head).
struct PlainRowStats {
  float max_score = 0, sum = 0, delta = 0;  // sum == 0: the row sees no key
};
PlainRowStats plain_row_stats(const AttentionShape& s, const float* q, const float* k,
                              const float* v, const float* dout, int64_t b, int64_t h, int64_t i,
                              bool is_bf16);
std::vector<PlainRowStats> plain_group_stats(const AttentionShape& s, const float* q,
                                             const float* k, const float* v, const float* dout,
                                             int64_t b, int64_t hk, bool is_bf16);
void plain_dq_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                  const float* dout, int64_t b, int64_t h, int64_t i, const PlainRowStats& stats,
                  bool is_bf16, float* dq);
void plain_dkv_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                   const float* dout, int64_t b, int64_t hk, int64_t j,
                   const PlainRowStats* group_stats, bool is_bf16, float* dk, float* dv);

// The whole problem: dq in q's layout (batch, seqlen_q, heads, head_dim), dk and dv in k's
// (batch, seqlen_k, heads_kv, head_dim), contiguous; on all hardware threads.
void reference_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* dout, std::vector<double>* dq, std::vector<double>* dk,
                        std::vector<double>* dv);
void plain_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                    const float* dout, bool is_bf16, std::vector<float>* dq,
                    std::vector<float>* dk, std::vector<float>* dv);

// Runs fn(index) for index in [0, n) on all hardware threads.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace fa3test
