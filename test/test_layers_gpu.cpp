// GPU tests of the ptx/ and tile/ layers: TMA with the 128B swizzle (and its out-of-bounds
// fill and clipping), SS wgmma with K-major descriptors, RS wgmma with an MN-major B and the
// accumulator -> A-operand conversion; the softmax's MUFU wrappers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gpu_env.h"
#include "gpu_kernels/layer_kernels.h"
#include "runtime/driver.h"
#include "runtime/forward_launch.h"
#include "support/half.h"

using namespace fa3test;

namespace {

fa3::Driver load_driver() {
  fa3::Driver d;
  const fa3::Error e = fa3::Driver::load(&d);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  return d;
}

}  // namespace

TEST_CASE("TMA 4-D box load with 128B swizzle, zero fill and clipped store", "[gpu][layers][sanitize]") {
  const int B = 2, S = 100, H = 3, D = 128;
  std::mt19937_64 rng(7);
  // A packed QKV buffer (B, S, 3, H, D); the tensor under test is its "k" slice.
  const size_t packed = static_cast<size_t>(B) * S * 3 * H * D;
  std::vector<uint16_t> bits = random_16bit(packed, true, rng, nullptr);
  DeviceBuffer src(packed * 2), dst(static_cast<size_t>(B) * S * H * D * 2);
  src.upload(bits.data(), packed * 2);
  dst.poison();

  fa3_tensor k{};
  k.data = src.as<uint16_t>() + H * D;
  k.dtype = FA3_BF16;
  k.batch = B; k.seqlen = S; k.heads = H; k.head_dim = D;
  k.stride_batch = int64_t{S} * 3 * H * D; k.stride_seq = 3 * H * D; k.stride_head = D;
  fa3_tensor out{};
  out.data = dst.get();
  out.dtype = FA3_BF16;
  out.batch = B; out.seqlen = S; out.heads = H; out.head_dim = D;
  out.stride_batch = int64_t{S} * H * D; out.stride_seq = H * D; out.stride_head = D;

  const fa3::Driver d = load_driver();
  fa3::TensorMapBytes load_map, store_map;
  REQUIRE_FALSE(fa3::encode_tensor_map(d, k, "k", 64, &load_map).failed());
  REQUIRE_FALSE(fa3::encode_tensor_map(d, out, "out", 64, &store_map).failed());

  // Rows 40..103 of (batch 1, head 2), columns 64..127: rows 100..103 are out of bounds.
  const int load_coord[4] = {64, 40, 2, 1};
  // Stored at rows 60..123 of (batch 0, head 1), columns 0..63: rows >= 100 must be clipped.
  const int store_coord[4] = {0, 60, 1, 0};
  std::vector<uint16_t> tile;
  const std::string err = run_tma_roundtrip(load_map, store_map, load_coord, store_coord, &tile);
  INFO(err);
  REQUIRE(err.empty());

  auto src_at = [&](int b, int s, int h, int c) {
    return bits[((static_cast<size_t>(b) * S + s) * 3 + 1) * H * D + static_cast<size_t>(h) * D + c];
  };
  int wrong = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      const int s = 40 + r;
      const uint16_t want = s < S ? src_at(1, s, 2, 64 + c) : uint16_t{0};
      if (tile[r * 64 + c] != want) ++wrong;
    }
  CHECK(wrong == 0);

  std::vector<uint16_t> stored(static_cast<size_t>(B) * S * H * D);
  dst.download(stored.data(), stored.size() * 2);
  int wrong_written = 0, wrong_untouched = 0;
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < H; ++h)
        for (int c = 0; c < D; ++c) {
          const uint16_t got = stored[((static_cast<size_t>(b) * S + s) * H + h) * D + c];
          const bool in_box = b == 0 && h == 1 && s >= 60 && c < 64;
          if (in_box) wrong_written += got != tile[(s - 60) * 64 + c];
          else wrong_untouched += got != 0xffff;
        }
  CHECK(wrong_written == 0);
  CHECK(wrong_untouched == 0);
}

namespace {

struct GemmShape {
  bool bf16;
  int n, k;
};

double max_abs_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

}  // namespace

TEST_CASE("SS wgmma with K-major 128B-swizzled descriptors computes A B^T", "[gpu][layers][sanitize]") {
  const GemmShape shape = GENERATE(GemmShape{true, 128, 128}, GemmShape{false, 64, 256},
                                   GemmShape{true, 176, 64});
  CAPTURE(shape.bf16, shape.n, shape.k);
  std::mt19937_64 rng(11 + shape.n);
  std::vector<float> a, b;
  const auto a_bits = random_16bit(64 * shape.k, shape.bf16, rng, &a);
  const auto b_bits = random_16bit(static_cast<size_t>(shape.n) * shape.k, shape.bf16, rng, &b);
  std::vector<float> c;
  const std::string err = run_gemm_ss(shape.bf16, shape.n, shape.k, a_bits, b_bits, &c);
  INFO(err);
  REQUIRE(err.empty());
  std::vector<double> want(64 * shape.n, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < shape.n; ++j)
      for (int kk = 0; kk < shape.k; ++kk)
        want[i * shape.n + j] += static_cast<double>(a[i * shape.k + kk]) * b[j * shape.k + kk];
  CHECK(max_abs_diff(c, want) < 1e-3);
}

TEST_CASE("RS wgmma with an MN-major B and accumulator-to-A conversion computes P V",
          "[gpu][layers][sanitize]") {
  const GemmShape shape = GENERATE(GemmShape{true, 128, 64}, GemmShape{false, 256, 64},
                                   GemmShape{true, 64, 128});
  CAPTURE(shape.bf16, shape.n, shape.k);
  std::mt19937_64 rng(23 + shape.n);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> p(64 * shape.k);
  for (float& x : p) x = unit(rng);
  std::vector<float> v;
  const auto v_bits = random_16bit(static_cast<size_t>(shape.k) * shape.n, shape.bf16, rng, &v);
  std::vector<float> o;
  const std::string err = run_gemm_rs(shape.bf16, shape.n, shape.k, p, v_bits, &o);
  INFO(err);
  REQUIRE(err.empty());
  std::vector<double> want(64 * shape.n, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < shape.n; ++j)
      for (int kk = 0; kk < shape.k; ++kk)
        want[i * shape.n + j] +=
            static_cast<double>(round_to_16bit(p[i * shape.k + kk], shape.bf16)) * v[kk * shape.n + j];
  CHECK(max_abs_diff(o, want) < 1e-3);
}

TEST_CASE("The softmax's MUFU wrappers and 16-byte shared-memory accesses", "[gpu][layers][sanitize]") {
  // x over the range the softmax and its epilogue see: 2^x of scores around 0, 1/l and
  // log2 l of row sums from 1 to a few thousand (and far beyond, both ways), and the edges.
  std::vector<float> x;
  for (int i = 0; i < 500; ++i)
    x.push_back(std::ldexp(1.0f + 0.37f * static_cast<float>(i % 7) / 7.0f, i / 10 - 25));
  for (float v : {-30.5f, -8.25f, -1.0f, -0.001f, 0.0f, 0.5f, 1.0f, 7.75f, 29.9f, 2.0f, 3.0f,
                  -INFINITY})
    x.push_back(v);
  REQUIRE(x.size() == 512);
  MathResults r;
  const std::string err = run_math_wrappers(x, &r);
  INFO(err);
  REQUIRE(err.empty());
  const double rel = std::ldexp(1.0, -20);  // the PTX ISA gives ~2^-22 for these
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i, x[i]);
    if (std::isfinite(x[i]) && std::fabs(x[i]) < 100) {
      const double want = std::exp2(static_cast<double>(x[i]));
      CHECK(std::fabs(r.ex2[i] - want) <= rel * want);
    }
    if (x[i] > 0) {
      const double log2x = std::log2(static_cast<double>(x[i]));
      CHECK(std::fabs(r.lg2[i] - log2x) <= rel * std::max(1.0, std::fabs(log2x)));
      const double inv = 1.0 / static_cast<double>(x[i]);
      CHECK(std::fabs(r.rcp[i] - inv) <= rel * inv);
    }
    CHECK(std::memcmp(&r.shared_roundtrip[i], &x[i], sizeof(float)) == 0);
  }
  // The epilogue's edges: an empty row's l = 0 gives log2 = -inf; a masked score's 2^-inf = 0.
  CHECK(r.lg2[504] == -INFINITY);
  CHECK(r.ex2[511] == 0.0f);
}
