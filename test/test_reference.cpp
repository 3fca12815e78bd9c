// The float64 reference the GPU tests trust, checked against cases with known answers and a
// naive full-matrix formula.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "support/half.h"
#include "support/reference.h"

using namespace fa3test;

namespace {

std::vector<float> randn(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// softmax(scale Q K^T + mask) V for one (b, h), building the whole score matrix.
void naive_head(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, int64_t b, int64_t h, std::vector<double>* o,
                std::vector<double>* lse) {
  const int64_t D = s.head_dim, hk = h * s.heads_kv / s.heads;
  o->assign(static_cast<size_t>(s.seqlen_q * D), 0.0);
  lse->assign(static_cast<size_t>(s.seqlen_q), 0.0);
  for (int64_t i = 0; i < s.seqlen_q; ++i) {
    std::vector<double> p(static_cast<size_t>(s.seqlen_k));
    double total = 0;
    for (int64_t j = 0; j < s.seqlen_k; ++j) {
      const bool visible = !s.causal || j - i <= s.seqlen_k - s.seqlen_q;
      double dot = 0;
      for (int64_t c = 0; c < D; ++c)
        dot += static_cast<double>(q[static_cast<size_t>(((b * s.seqlen_q + i) * s.heads + h) * D + c)]) *
               k[static_cast<size_t>(((b * s.seqlen_k + j) * s.heads_kv + hk) * D + c)];
      p[static_cast<size_t>(j)] = visible ? std::exp(dot * s.effective_scale()) : 0.0;
      total += p[static_cast<size_t>(j)];
    }
    (*lse)[static_cast<size_t>(i)] = total > 0 ? std::log(total) : -INFINITY;
    for (int64_t j = 0; j < s.seqlen_k && total > 0; ++j)
      for (int64_t c = 0; c < D; ++c)
        (*o)[static_cast<size_t>(i * D + c)] +=
            p[static_cast<size_t>(j)] / total *
            v[static_cast<size_t>(((b * s.seqlen_k + j) * s.heads_kv + hk) * D + c)];
  }
}

}  // namespace

TEST_CASE("reference: one key gives O = V and LSE = its score", "[cpu][reference]") {
  AttentionShape s;
  s.seqlen_q = 3; s.seqlen_k = 1; s.head_dim = 64;
  std::mt19937_64 rng(1);
  auto q = randn(3 * 64, rng), k = randn(64, rng), v = randn(64, rng);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<double> o(64);
    double lse;
    reference_row(s, q.data(), k.data(), v.data(), 0, 0, i, o.data(), &lse);
    double dot = 0;
    for (int c = 0; c < 64; ++c) dot += static_cast<double>(q[static_cast<size_t>(i * 64 + c)]) * k[static_cast<size_t>(c)];
    CHECK(lse == Approx(dot / 8.0).epsilon(1e-12));
    for (int c = 0; c < 64; ++c) CHECK(o[static_cast<size_t>(c)] == Approx(v[static_cast<size_t>(c)]).epsilon(1e-12));
  }
}

TEST_CASE("reference: equal scores average V", "[cpu][reference]") {
  AttentionShape s;
  s.seqlen_q = 1; s.seqlen_k = 4; s.head_dim = 64;
  std::vector<float> q(64, 0.0f), k(4 * 64, 1.0f), v(4 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7);
  std::vector<double> o(64);
  double lse;
  reference_row(s, q.data(), k.data(), v.data(), 0, 0, 0, o.data(), &lse);
  CHECK(lse == Approx(std::log(4.0)));
  for (int c = 0; c < 64; ++c) {
    const double mean = (v[static_cast<size_t>(c)] + v[static_cast<size_t>(64 + c)] +
                         v[static_cast<size_t>(128 + c)] + v[static_cast<size_t>(192 + c)]) / 4.0;
    CHECK(o[static_cast<size_t>(c)] == Approx(mean));
  }
}

TEST_CASE("reference: causal is bottom-right aligned; rows with no key give O = 0, LSE = -inf",
          "[cpu][reference]") {
  AttentionShape s;
  s.causal = true;
  s.seqlen_q = 5; s.seqlen_k = 3;  // rows 0, 1 see nothing; row 2 sees key 0; row 4 sees all
  CHECK(s.last_key(0) <= 0);
  CHECK(s.last_key(1) <= 0);
  CHECK(s.last_key(2) == 1);
  CHECK(s.last_key(4) == 3);
  s.seqlen_q = 2; s.seqlen_k = 6;  // row 0 sees keys 0..4, row 1 all 6
  CHECK(s.last_key(0) == 5);
  CHECK(s.last_key(1) == 6);

  s.seqlen_q = 5; s.seqlen_k = 3; s.head_dim = 64;
  std::mt19937_64 rng(2);
  auto q = randn(5 * 64, rng), k = randn(3 * 64, rng), v = randn(3 * 64, rng);
  std::vector<double> o(64);
  double lse;
  reference_row(s, q.data(), k.data(), v.data(), 0, 0, 1, o.data(), &lse);
  CHECK(std::isinf(lse));
  CHECK(lse < 0);
  for (double x : o) CHECK(x == 0.0);
  float of[64], lsef;
  plain_row(s, q.data(), k.data(), v.data(), 0, 0, 1, true, of, &lsef);
  CHECK(std::isinf(lsef));
  for (float x : of) CHECK(x == 0.0f);
}

TEST_CASE("reference rows agree with the naive formula (GQA, causal, scale)", "[cpu][reference]") {
  AttentionShape s;
  s.batch = 2; s.seqlen_q = 7; s.seqlen_k = 11; s.heads = 6; s.heads_kv = 2; s.head_dim = 64;
  s.causal = GENERATE(false, true);
  s.scale = GENERATE(0.0, 0.2);
  std::mt19937_64 rng(3);
  auto q = randn(static_cast<size_t>(s.batch * s.seqlen_q * s.heads * 64), rng);
  auto k = randn(static_cast<size_t>(s.batch * s.seqlen_k * s.heads_kv * 64), rng);
  auto v = randn(k.size(), rng);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      std::vector<double> o_naive, lse_naive;
      naive_head(s, q, k, v, b, h, &o_naive, &lse_naive);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        std::vector<double> o(64);
        double lse;
        reference_row(s, q.data(), k.data(), v.data(), b, h, i, o.data(), &lse);
        if (std::isinf(lse_naive[static_cast<size_t>(i)])) {
          CHECK(std::isinf(lse));
        } else {
          CHECK(lse == Approx(lse_naive[static_cast<size_t>(i)]).epsilon(1e-12));
        }
        for (int c = 0; c < 64; ++c)
          CHECK(o[static_cast<size_t>(c)] == Approx(o_naive[static_cast<size_t>(i * 64 + c)]).epsilon(1e-10).margin(1e-12));
        // The plain same-precision row is close but not exact: that is its purpose.
        float of[64], lsef;
        plain_row(s, q.data(), k.data(), v.data(), b, h, i, true, of, &lsef);
        for (int c = 0; c < 64; ++c) CHECK(std::fabs(of[c] - o[static_cast<size_t>(c)]) < 0.05);
      }
    }
}
