#include "check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "support/half.h"

namespace fa3bench {

bool RowIndex::operator<(const RowIndex& o) const {
  return std::tie(batch, head, row) < std::tie(o.batch, o.head, o.row);
}
bool RowIndex::operator==(const RowIndex& o) const {
  return batch == o.batch && head == o.head && row == o.row;
}

namespace {

uint64_t next_random(uint64_t& state) {  // splitmix64: deterministic samples, no <random> state
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<RowIndex> all_rows(const Problem& p) {
  std::vector<RowIndex> rows;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i) rows.push_back({b, h, i});
  return rows;
}

// Position of sample k: of every 8 samples one is a sequence's first row, one its last row
// (the boundary rows: causal masking and tails live there), the rest spread evenly.
int64_t sampled_position(int64_t k, int64_t seqlen_q) {
  if (k % 8 == 0) return 0;
  if (k % 8 == 1) return seqlen_q - 1;
  return k * (seqlen_q - 1) / (kSampledRows - 1);
}

int64_t o_offset(const Problem& p, const RowIndex& r) {
  return ((r.batch * p.seqlen_q + r.row) * p.heads + r.head) * p.head_dim;
}
int64_t lse_offset(const Problem& p, const RowIndex& r) {
  return (r.batch * p.heads + r.head) * p.seqlen_q + r.row;
}

}  // namespace

std::vector<RowIndex> sample_rows(const Problem& p) {
  if (p.query_rows() <= kCheckAllRowsUpTo) return all_rows(p);
  std::vector<RowIndex> rows;
  uint64_t state = 0x5eed;
  // The boundary samples' (batch, head) pairs: a pair each 8 samples, evenly spaced over all
  // of them, so that they repeat none and reach the last heads too. The sample's number, not
  // its position, says which samples these are: at seqlen_q 1 or 2 every position is a first
  // or a last row, and the random pairs must stay random there.
  const int64_t pairs = p.batch * p.heads;
  const int64_t pair_stride = std::max<int64_t>(1, pairs / (kSampledRows / 8));
  for (int64_t k = 0; k < kSampledRows; ++k) {
    const int64_t position = sampled_position(k, p.seqlen_q);
    int64_t b, h;
    if (k % 8 < 2) {
      const int64_t pair = (k / 8) * pair_stride % pairs;
      b = pair % p.batch;
      h = pair / p.batch;
    } else {
      b = static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(p.batch));
      h = static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(p.heads));
    }
    rows.push_back({b, h, position});
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

fa3test::AttentionShape attention_shape(const Problem& p) {
  fa3test::AttentionShape s;
  s.batch = p.batch;
  s.seqlen_q = p.seqlen_q;
  s.seqlen_k = p.seqlen_k;
  s.heads = p.heads;
  s.heads_kv = p.kv_heads;
  s.head_dim = p.head_dim;
  s.causal = p.causal;
  s.scale = 0;  // 1/sqrt(head_dim), as the bench passes softmax_scale = 0 to fa3
  return s;
}

double abs_error(double ours, double reference) {
  if (std::isnan(ours) || std::isnan(reference)) return std::numeric_limits<double>::infinity();
  if (std::isinf(ours) || std::isinf(reference))
    return ours == reference ? 0.0 : std::numeric_limits<double>::infinity();
  return std::fabs(ours - reference);
}

// A plain error that is not finite (the plain implementation overflowed or gave NaN) bounds
// nothing: the rule fails rather than pass whatever ours is.
bool within_error_rule(double ours, double plain) { return std::isfinite(plain) && ours <= 2.0 * plain + 1e-5; }

bool lse_within_bound(double ours) { return ours <= kLseBound; }

Reference compute_reference(const Problem& p, const float* q, const float* k, const float* v) {
  Reference ref;
  ref.rows = sample_rows(p);
  const size_t n = ref.rows.size(), d = static_cast<size_t>(p.head_dim);
  ref.o.assign(n * d, 0.0);
  ref.lse.assign(n, 0.0);
  std::vector<double> plain_o_error(n, 0.0), plain_lse_error(n, 0.0);
  const fa3test::AttentionShape shape = attention_shape(p);
  const bool is_bf16 = p.dtype == DType::BF16;
  fa3test::parallel_for(static_cast<int64_t>(n), [&](int64_t r) {
    const RowIndex& row = ref.rows[static_cast<size_t>(r)];
    double* o = ref.o.data() + static_cast<size_t>(r) * d;
    fa3test::reference_row(shape, q, k, v, row.batch, row.head, row.row, o, &ref.lse[r]);
    std::vector<float> plain(d);
    float plain_lse = 0;
    fa3test::plain_row(shape, q, k, v, row.batch, row.head, row.row, is_bf16, plain.data(),
                       &plain_lse);
    for (size_t c = 0; c < d; ++c)
      plain_o_error[r] = std::max(plain_o_error[r], abs_error(plain[c], o[c]));
    plain_lse_error[r] = abs_error(plain_lse, ref.lse[r]);
  });
  for (size_t r = 0; r < n; ++r) {
    ref.plain_o_error = std::max(ref.plain_o_error, plain_o_error[r]);
    ref.plain_lse_error = std::max(ref.plain_lse_error, plain_lse_error[r]);
  }
  return ref;
}

CheckResult compare_with_reference(const Problem& p, const Reference& ref, const uint16_t* o,
                                   const float* lse) {
  CheckResult result;
  result.plain_o_error = ref.plain_o_error;
  result.plain_lse_error = ref.plain_lse_error;
  result.has_lse = lse != nullptr;
  const bool is_bf16 = p.dtype == DType::BF16;
  const size_t d = static_cast<size_t>(p.head_dim);
  for (size_t r = 0; r < ref.rows.size(); ++r) {
    const uint16_t* ours = o + o_offset(p, ref.rows[r]);
    for (size_t c = 0; c < d; ++c)
      result.o_error = std::max(result.o_error,
                                abs_error(fa3test::from_16bit(ours[c], is_bf16), ref.o[r * d + c]));
    if (lse)
      result.lse_error =
          std::max(result.lse_error, abs_error(lse[lse_offset(p, ref.rows[r])], ref.lse[r]));
  }
  result.pass = within_error_rule(result.o_error, result.plain_o_error) &&
                (!lse || lse_within_bound(result.lse_error));
  return result;
}

}  // namespace fa3bench
