#include "support/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "support/half.h"

namespace fa3test {

double AttentionShape::effective_scale() const {
  return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

int64_t AttentionShape::last_key(int64_t i) const {
  if (!causal) return seqlen_k;
  return std::min(seqlen_k, i + seqlen_k - seqlen_q + 1);
}

namespace {

const float* row_of(const float* x, int64_t seqlen, int64_t heads, int64_t head_dim,
                    int64_t b, int64_t s, int64_t h) {
  return x + ((b * seqlen + s) * heads + h) * head_dim;
}

}  // namespace

void reference_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                   int64_t b, int64_t h, int64_t i, double* o, double* lse) {
  const int64_t d = s.head_dim, hk = h / (s.heads / s.heads_kv);
  const int64_t n = std::max<int64_t>(0, s.last_key(i));
  std::fill(o, o + d, 0.0);
  if (n == 0) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, h);
  std::vector<double> scores(n);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
    double dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
    scores[j] = dot * s.effective_scale();
    max_score = std::max(max_score, scores[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double p = std::exp(scores[j] - max_score);
    sum += p;
    const float* vj = row_of(v, s.seqlen_k, s.heads_kv, d, b, j, hk);
    for (int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
  }
  for (int64_t c = 0; c < d; ++c) o[c] /= sum;
  *lse = max_score + std::log(sum);
}

void plain_row(const AttentionShape& s, const float* q, const float* k, const float* v,
               int64_t b, int64_t h, int64_t i, bool is_bf16, float* o, float* lse) {
  const int64_t d = s.head_dim, hk = h / (s.heads / s.heads_kv);
  const int64_t n = std::max<int64_t>(0, s.last_key(i));
  std::fill(o, o + d, 0.0f);
  if (n == 0) {
    *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, h);
  const float scale = static_cast<float>(s.effective_scale());
  std::vector<float> scores(n);
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
    float dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
    scores[j] = round_to_16bit(dot, is_bf16) * scale;  // S is materialized in 16 bits
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  std::vector<float> acc(d, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float p = round_to_16bit(scores[j] / sum, is_bf16);  // P is materialized in 16 bits
    const float* vj = row_of(v, s.seqlen_k, s.heads_kv, d, b, j, hk);
    for (int64_t c = 0; c < d; ++c) acc[c] += p * vj[c];
  }
  for (int64_t c = 0; c < d; ++c) o[c] = round_to_16bit(acc[c], is_bf16);
  *lse = max_score + std::log(sum);
}

namespace {

double dot64(const float* a, const float* b, int64_t n) {
  double x = 0;
  for (int64_t c = 0; c < n; ++c) x += static_cast<double>(a[c]) * b[c];
  return x;
}

float dot32(const float* a, const float* b, int64_t n) {
  float x = 0;
  for (int64_t c = 0; c < n; ++c) x += a[c] * b[c];
  return x;
}

int64_t group_size(const AttentionShape& s) { return s.heads / s.heads_kv; }

}  // namespace

BackwardRowStats reference_row_stats(const AttentionShape& s, const float* q, const float* k,
                                     const float* v, const float* dout, int64_t b, int64_t h,
                                     int64_t i) {
  const int64_t d = s.head_dim;
  std::vector<double> o(static_cast<size_t>(d));
  BackwardRowStats st;
  reference_row(s, q, k, v, b, h, i, o.data(), &st.lse);
  const float* doi = row_of(dout, s.seqlen_q, s.heads, d, b, i, h);
  for (int64_t c = 0; c < d; ++c) st.delta += o[static_cast<size_t>(c)] * doi[c];
  return st;
}

std::vector<BackwardRowStats> reference_group_stats(const AttentionShape& s, const float* q,
                                                    const float* k, const float* v,
                                                    const float* dout, int64_t b, int64_t hk) {
  const int64_t g = group_size(s);
  std::vector<BackwardRowStats> stats(static_cast<size_t>(g * s.seqlen_q));
  parallel_for(g * s.seqlen_q, [&](int64_t idx) {
    stats[static_cast<size_t>(idx)] =
        reference_row_stats(s, q, k, v, dout, b, hk * g + idx / s.seqlen_q, idx % s.seqlen_q);
  });
  return stats;
}

void reference_dq_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                      const float* dout, int64_t b, int64_t h, int64_t i,
                      const BackwardRowStats& stats, double* dq) {
  const int64_t d = s.head_dim, hk = h / group_size(s);
  const double scale = s.effective_scale();
  std::fill(dq, dq + d, 0.0);
  const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, h);
  const float* doi = row_of(dout, s.seqlen_q, s.heads, d, b, i, h);
  for (int64_t j = 0; j < s.last_key(i); ++j) {
    const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
    const float* vj = row_of(v, s.seqlen_k, s.heads_kv, d, b, j, hk);
    const double p = std::exp(dot64(qi, kj, d) * scale - stats.lse);
    const double ds = p * (dot64(doi, vj, d) - stats.delta);
    for (int64_t c = 0; c < d; ++c) dq[c] += scale * ds * kj[c];
  }
}

void reference_dkv_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const float* dout, int64_t b, int64_t hk, int64_t j,
                       const BackwardRowStats* group_stats, double* dk, double* dv) {
  const int64_t d = s.head_dim, g = group_size(s);
  const double scale = s.effective_scale();
  std::fill(dk, dk + d, 0.0);
  std::fill(dv, dv + d, 0.0);
  const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
  const float* vj = row_of(v, s.seqlen_k, s.heads_kv, d, b, j, hk);
  for (int64_t hh = 0; hh < g; ++hh)
    for (int64_t i = 0; i < s.seqlen_q; ++i) {
      if (j >= s.last_key(i)) continue;  // masked (or the row sees no key at all)
      const BackwardRowStats& st = group_stats[hh * s.seqlen_q + i];
      const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, hk * g + hh);
      const float* doi = row_of(dout, s.seqlen_q, s.heads, d, b, i, hk * g + hh);
      const double p = std::exp(dot64(qi, kj, d) * scale - st.lse);
      const double ds = p * (dot64(doi, vj, d) - st.delta);
      for (int64_t c = 0; c < d; ++c) {
        dv[c] += p * doi[c];
        dk[c] += scale * ds * qi[c];
      }
    }
}

PlainRowStats plain_row_stats(const AttentionShape& s, const float* q, const float* k,
                              const float* v, const float* dout, int64_t b, int64_t h, int64_t i,
                              bool is_bf16) {
  const int64_t d = s.head_dim, hk = h / group_size(s);
  const int64_t n = std::max<int64_t>(0, s.last_key(i));
  PlainRowStats st;
  if (n == 0) return st;
  // The same operations in the same order as plain_row, so P here is plain_row's P.
  const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, h);
  const float scale = static_cast<float>(s.effective_scale());
  st.max_score = -std::numeric_limits<float>::infinity();
  std::vector<float> scores(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
    scores[static_cast<size_t>(j)] = round_to_16bit(dot32(qi, kj, d), is_bf16) * scale;
    st.max_score = std::max(st.max_score, scores[static_cast<size_t>(j)]);
  }
  for (int64_t j = 0; j < n; ++j) st.sum += std::exp(scores[static_cast<size_t>(j)] - st.max_score);
  std::vector<float> o(static_cast<size_t>(d));
  float lse;
  plain_row(s, q, k, v, b, h, i, is_bf16, o.data(), &lse);
  const float* doi = row_of(dout, s.seqlen_q, s.heads, d, b, i, h);
  st.delta = dot32(doi, o.data(), d);
  return st;
}

std::vector<PlainRowStats> plain_group_stats(const AttentionShape& s, const float* q,
                                             const float* k, const float* v, const float* dout,
                                             int64_t b, int64_t hk, bool is_bf16) {
  const int64_t g = group_size(s);
  std::vector<PlainRowStats> stats(static_cast<size_t>(g * s.seqlen_q));
  parallel_for(g * s.seqlen_q, [&](int64_t idx) {
    stats[static_cast<size_t>(idx)] =
        plain_row_stats(s, q, k, v, dout, b, hk * g + idx / s.seqlen_q, idx % s.seqlen_q, is_bf16);
  });
  return stats;
}

namespace {

// dS and P of (i, j) as the plain backward materializes them (16-bit values).
struct PlainEntry {
  float p, ds;
};
PlainEntry plain_entry(const AttentionShape& s, const float* qi, const float* kj, const float* vj,
                       const float* doi, const PlainRowStats& st, bool is_bf16) {
  const int64_t d = s.head_dim;
  const float scale = static_cast<float>(s.effective_scale());
  const float score = round_to_16bit(dot32(qi, kj, d), is_bf16) * scale;
  const float p = round_to_16bit(std::exp(score - st.max_score) / st.sum, is_bf16);
  const float dp = round_to_16bit(dot32(doi, vj, d), is_bf16);
  return {p, round_to_16bit(p * (dp - st.delta), is_bf16)};
}

}  // namespace

void plain_dq_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                  const float* dout, int64_t b, int64_t h, int64_t i, const PlainRowStats& stats,
                  bool is_bf16, float* dq) {
  const int64_t d = s.head_dim, hk = h / group_size(s);
  const float scale = static_cast<float>(s.effective_scale());
  std::vector<float> acc(static_cast<size_t>(d), 0.0f);
  const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, h);
  const float* doi = row_of(dout, s.seqlen_q, s.heads, d, b, i, h);
  for (int64_t j = 0; j < s.last_key(i); ++j) {
    const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
    const float* vj = row_of(v, s.seqlen_k, s.heads_kv, d, b, j, hk);
    const PlainEntry e = plain_entry(s, qi, kj, vj, doi, stats, is_bf16);
    for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += e.ds * kj[c];
  }
  for (int64_t c = 0; c < d; ++c)
    dq[c] = round_to_16bit(scale * acc[static_cast<size_t>(c)], is_bf16);
}

void plain_dkv_row(const AttentionShape& s, const float* q, const float* k, const float* v,
                   const float* dout, int64_t b, int64_t hk, int64_t j,
                   const PlainRowStats* group_stats, bool is_bf16, float* dk, float* dv) {
  const int64_t d = s.head_dim, g = group_size(s);
  const float scale = static_cast<float>(s.effective_scale());
  const float* kj = row_of(k, s.seqlen_k, s.heads_kv, d, b, j, hk);
  const float* vj = row_of(v, s.seqlen_k, s.heads_kv, d, b, j, hk);
  std::vector<float> acc_k(static_cast<size_t>(d)), acc_v(static_cast<size_t>(d));
  std::vector<float> sum_k(static_cast<size_t>(d), 0.0f), sum_v(static_cast<size_t>(d), 0.0f);
  for (int64_t hh = 0; hh < g; ++hh) {
    std::fill(acc_k.begin(), acc_k.end(), 0.0f);
    std::fill(acc_v.begin(), acc_v.end(), 0.0f);
    for (int64_t i = 0; i < s.seqlen_q; ++i) {
      if (j >= s.last_key(i)) continue;
      const float* qi = row_of(q, s.seqlen_q, s.heads, d, b, i, hk * g + hh);
      const float* doi = row_of(dout, s.seqlen_q, s.heads, d, b, i, hk * g + hh);
      const PlainEntry e =
          plain_entry(s, qi, kj, vj, doi, group_stats[hh * s.seqlen_q + i], is_bf16);
      for (int64_t c = 0; c < d; ++c) {
        acc_v[static_cast<size_t>(c)] += e.p * doi[c];
        acc_k[static_cast<size_t>(c)] += e.ds * qi[c];
      }
    }
    for (size_t c = 0; c < static_cast<size_t>(d); ++c) {
      sum_k[c] += round_to_16bit(scale * acc_k[c], is_bf16);
      sum_v[c] += round_to_16bit(acc_v[c], is_bf16);
    }
  }
  for (int64_t c = 0; c < d; ++c) {
    dk[c] = round_to_16bit(sum_k[static_cast<size_t>(c)], is_bf16);
    dv[c] = round_to_16bit(sum_v[static_cast<size_t>(c)], is_bf16);
  }
}

namespace {

// Runs the row functions of one backward reference over the whole problem, a (batch, K/V
// head) group at a time: its stats, then its dQ rows and its dK/dV rows.
template <class T, class Stats, class GroupStats, class DqRow, class DkvRow>
void whole_backward(const AttentionShape& s, GroupStats group_stats, DqRow dq_row, DkvRow dkv_row,
                    std::vector<T>* dq, std::vector<T>* dk, std::vector<T>* dv) {
  const int64_t d = s.head_dim, g = group_size(s);
  dq->assign(static_cast<size_t>(s.batch * s.seqlen_q * s.heads * d), T(0));
  dk->assign(static_cast<size_t>(s.batch * s.seqlen_k * s.heads_kv * d), T(0));
  dv->assign(dk->size(), T(0));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t hk = 0; hk < s.heads_kv; ++hk) {
      const std::vector<Stats> stats = group_stats(b, hk);
      parallel_for(g * s.seqlen_q, [&](int64_t idx) {
        const int64_t hh = idx / s.seqlen_q, i = idx % s.seqlen_q, h = hk * g + hh;
        dq_row(b, h, i, stats[static_cast<size_t>(idx)],
               dq->data() + ((b * s.seqlen_q + i) * s.heads + h) * d);
      });
      parallel_for(s.seqlen_k, [&](int64_t j) {
        const int64_t at = ((b * s.seqlen_k + j) * s.heads_kv + hk) * d;
        dkv_row(b, hk, j, stats.data(), dk->data() + at, dv->data() + at);
      });
    }
}

}  // namespace

void reference_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* dout, std::vector<double>* dq, std::vector<double>* dk,
                        std::vector<double>* dv) {
  whole_backward<double, BackwardRowStats>(
      s, [&](int64_t b, int64_t hk) { return reference_group_stats(s, q, k, v, dout, b, hk); },
      [&](int64_t b, int64_t h, int64_t i, const BackwardRowStats& st, double* out) {
        reference_dq_row(s, q, k, v, dout, b, h, i, st, out);
      },
      [&](int64_t b, int64_t hk, int64_t j, const BackwardRowStats* st, double* out_k,
          double* out_v) { reference_dkv_row(s, q, k, v, dout, b, hk, j, st, out_k, out_v); },
      dq, dk, dv);
}

void plain_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                    const float* dout, bool is_bf16, std::vector<float>* dq,
                    std::vector<float>* dk, std::vector<float>* dv) {
  whole_backward<float, PlainRowStats>(
      s, [&](int64_t b, int64_t hk) { return plain_group_stats(s, q, k, v, dout, b, hk, is_bf16); },
      [&](int64_t b, int64_t h, int64_t i, const PlainRowStats& st, float* out) {
        plain_dq_row(s, q, k, v, dout, b, h, i, st, is_bf16, out);
      },
      [&](int64_t b, int64_t hk, int64_t j, const PlainRowStats* st, float* out_k, float* out_v) {
        plain_dkv_row(s, q, k, v, dout, b, hk, j, st, is_bf16, out_k, out_v);
      },
      dq, dk, dv);
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  const int64_t workers = std::max<int64_t>(
      1, std::min<int64_t>(n, static_cast<int64_t>(std::thread::hardware_concurrency())));
  std::atomic<int64_t> next{0};
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (int64_t idx; (idx = next.fetch_add(1)) < n;) fn(idx);
    });
  for (std::thread& t : threads) t.join();
}

}  // namespace fa3test
