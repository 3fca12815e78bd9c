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
