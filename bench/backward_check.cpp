#include "backward_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "check.h"
#include "support/half.h"
#include "support/reference.h"

namespace fa3bench {

namespace {

std::vector<int64_t> sampled_positions(int64_t length) {
  std::vector<int64_t> positions;
  if (length <= kBackwardAllPositionsUpTo) {
    for (int64_t i = 0; i < length; ++i) positions.push_back(i);
    return positions;
  }
  for (int64_t k = 0; k < kBackwardSampledPositions; ++k)
    positions.push_back(k * (length - 1) / (kBackwardSampledPositions - 1));
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  return positions;
}

// Multiply-adds of one group's pass over its query rows: its heads x unmasked pairs x head_dim.
double group_cost(const Problem& p) {
  const double pairs = p.causal ? static_cast<double>(causal_pairs(p.seqlen_q, p.seqlen_k))
                                : static_cast<double>(p.seqlen_q) * p.seqlen_k;
  return static_cast<double>(p.heads / p.kv_heads) * std::max(1.0, pairs) * p.head_dim;
}

std::string rule_failure(const char* gradient, double ours, double plain) {
  char text[160];
  std::snprintf(text, sizeof text, "%s error %.2e > 2 x plain %.2e + 1e-5", gradient, ours, plain);
  return text;
}

}  // namespace

BackwardSample sample_backward(const Problem& p) {
  BackwardSample s;
  s.query_rows = sampled_positions(p.seqlen_q);
  s.key_rows = sampled_positions(p.seqlen_k);
  const int64_t total = p.batch * p.kv_heads;
  const double affordable = std::floor(kBackwardReferenceBudget / group_cost(p));
  const int64_t count = std::min<int64_t>(
      total, std::clamp<int64_t>(static_cast<int64_t>(std::min(affordable, 1e9)), 1, kBackwardMaxGroups));
  for (int64_t n = 0; n < count; ++n) {
    const int64_t index = count == 1 ? 0 : n * (total - 1) / (count - 1);
    const BackwardSample::Group g{index / p.kv_heads, index % p.kv_heads};
    if (s.groups.empty() || !(s.groups.back() == g)) s.groups.push_back(g);
  }
  return s;
}

BackwardReference compute_backward_reference(const Problem& p, const float* q, const float* k,
                                             const float* v, const float* dout) {
  BackwardReference ref;
  ref.sample = sample_backward(p);
  const BackwardSample& s = ref.sample;
  const fa3test::AttentionShape shape = attention_shape(p);
  const bool is_bf16 = p.dtype == DType::BF16;
  const int64_t group = p.heads / p.kv_heads, d = p.head_dim;
  const int64_t nq = static_cast<int64_t>(s.query_rows.size());
  const int64_t nk = static_cast<int64_t>(s.key_rows.size());
  const int64_t groups = static_cast<int64_t>(s.groups.size());
  ref.dq.assign(static_cast<size_t>(groups * group * nq * d), 0.0);
  ref.dk.assign(static_cast<size_t>(groups * nk * d), 0.0);
  ref.dv.assign(ref.dk.size(), 0.0);
  // Per sampled row, the plain backward's max error over the row (reduced at the end, so the
  // parallel rows write disjoint entries).
  std::vector<double> plain_dq(static_cast<size_t>(groups * group * nq), 0.0);
  std::vector<double> plain_dk(static_cast<size_t>(groups * nk), 0.0), plain_dv(plain_dk.size(), 0.0);

  for (int64_t gi = 0; gi < groups; ++gi) {
    const int64_t b = s.groups[static_cast<size_t>(gi)].batch;
    const int64_t hk = s.groups[static_cast<size_t>(gi)].kv_head;
    const std::vector<fa3test::BackwardRowStats> stats =
        fa3test::reference_group_stats(shape, q, k, v, dout, b, hk);
    const std::vector<fa3test::PlainRowStats> plain_stats =
        fa3test::plain_group_stats(shape, q, k, v, dout, b, hk, is_bf16);

    fa3test::parallel_for(group * nq, [&](int64_t idx) {
      const int64_t hh = idx / nq, r = idx % nq;
      const int64_t i = s.query_rows[static_cast<size_t>(r)];
      const size_t row = static_cast<size_t>((gi * group + hh) * nq + r);
      const size_t st = static_cast<size_t>(hh * p.seqlen_q + i);
      double* out = ref.dq.data() + row * static_cast<size_t>(d);
      fa3test::reference_dq_row(shape, q, k, v, dout, b, hk * group + hh, i, stats[st], out);
      std::vector<float> plain(static_cast<size_t>(d));
      fa3test::plain_dq_row(shape, q, k, v, dout, b, hk * group + hh, i, plain_stats[st], is_bf16,
                            plain.data());
      for (int64_t c = 0; c < d; ++c)
        plain_dq[row] = std::max(plain_dq[row], abs_error(plain[static_cast<size_t>(c)], out[c]));
    });

    fa3test::parallel_for(nk, [&](int64_t r) {
      const int64_t j = s.key_rows[static_cast<size_t>(r)];
      const size_t row = static_cast<size_t>(gi * nk + r);
      double* out_k = ref.dk.data() + row * static_cast<size_t>(d);
      double* out_v = ref.dv.data() + row * static_cast<size_t>(d);
      fa3test::reference_dkv_row(shape, q, k, v, dout, b, hk, j, stats.data(), out_k, out_v);
      std::vector<float> plain_k(static_cast<size_t>(d)), plain_v(static_cast<size_t>(d));
      fa3test::plain_dkv_row(shape, q, k, v, dout, b, hk, j, plain_stats.data(), is_bf16,
                             plain_k.data(), plain_v.data());
      for (int64_t c = 0; c < d; ++c) {
        plain_dk[row] = std::max(plain_dk[row], abs_error(plain_k[static_cast<size_t>(c)], out_k[c]));
        plain_dv[row] = std::max(plain_dv[row], abs_error(plain_v[static_cast<size_t>(c)], out_v[c]));
      }
    });
  }
  for (double e : plain_dq) ref.plain_dq_error = std::max(ref.plain_dq_error, e);
  for (double e : plain_dk) ref.plain_dk_error = std::max(ref.plain_dk_error, e);
  for (double e : plain_dv) ref.plain_dv_error = std::max(ref.plain_dv_error, e);
  return ref;
}

BackwardCheckResult compare_backward(const Problem& p, const BackwardReference& ref,
                                     const uint16_t* dq, const uint16_t* dk, const uint16_t* dv) {
  BackwardCheckResult result;
  result.plain_dq_error = ref.plain_dq_error;
  result.plain_dk_error = ref.plain_dk_error;
  result.plain_dv_error = ref.plain_dv_error;
  const BackwardSample& s = ref.sample;
  const bool is_bf16 = p.dtype == DType::BF16;
  const int64_t group = p.heads / p.kv_heads, d = p.head_dim;
  const int64_t nq = static_cast<int64_t>(s.query_rows.size());
  const int64_t nk = static_cast<int64_t>(s.key_rows.size());
  auto max_error = [&](const uint16_t* ours, const double* reference, double* error) {
    for (int64_t c = 0; c < d; ++c)
      *error = std::max(*error, abs_error(fa3test::from_16bit(ours[c], is_bf16), reference[c]));
  };
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    const int64_t b = s.groups[gi].batch, hk = s.groups[gi].kv_head;
    for (int64_t hh = 0; hh < group; ++hh)
      for (int64_t r = 0; r < nq; ++r) {
        const int64_t h = hk * group + hh, i = s.query_rows[static_cast<size_t>(r)];
        const int64_t row = (static_cast<int64_t>(gi) * group + hh) * nq + r;
        max_error(dq + ((b * p.seqlen_q + i) * p.heads + h) * d, ref.dq.data() + row * d,
                  &result.dq_error);
      }
    for (int64_t r = 0; r < nk; ++r) {
      const int64_t j = s.key_rows[static_cast<size_t>(r)];
      const int64_t at = ((b * p.seqlen_k + j) * p.kv_heads + hk) * d;
      const int64_t row = static_cast<int64_t>(gi) * nk + r;
      max_error(dk + at, ref.dk.data() + row * d, &result.dk_error);
      max_error(dv + at, ref.dv.data() + row * d, &result.dv_error);
    }
  }
  const struct {
    const char* name;
    double ours, plain;
  } gradients[] = {{"dq", result.dq_error, result.plain_dq_error},
                   {"dk", result.dk_error, result.plain_dk_error},
                   {"dv", result.dv_error, result.plain_dv_error}};
  for (const auto& g : gradients)
    if (!within_error_rule(g.ours, g.plain))
      result.failure += (result.failure.empty() ? "" : "; ") + rule_failure(g.name, g.ours, g.plain);
  result.pass = result.failure.empty();
  return result;
}

}  // namespace fa3bench
