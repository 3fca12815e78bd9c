// GPU tests of the ptx/ and tile/ layers: TMA with the 128B swizzle (and its out-of-bounds
// fill and clipping), SS wgmma with K-major descriptors, RS wgmma with an MN-major B and the
// accumulator -> A-operand conversion; the softmax's MUFU wrappers. Then what the backward
// pass and the FP8 forward add: ldmatrix / stmatrix, e4m3 conversion and wgmma, the FP8 V
// transpose, SS wgmma with a transposed A, bulk copies, reduce-adds and semaphores.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "gpu_env.h"
#include "gpu_kernels/layer_kernels.h"
#include "gpu_kernels/layer_kernels_bwd_fp8.h"
#include "runtime/driver.h"
#include "runtime/forward_launch.h"
#include "support/half.h"
#include "tile/fragment_order.h"

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

// ---- The backward pass (paper Algorithm 3) and the FP8 forward (paper 3.3) ------------------

namespace {

// Nonzero integers in [lo, hi] (|x| <= 8 here): exact in e4m3, and every partial sum of
// products of them in these tests stays below 2^14 in magnitude (typically a few hundred),
// so it is exact even in the FP8 tensor cores' reduced-precision adder (about 14 significant
// bits): an e4m3 GEMM's result must match the integer reference exactly, in any order.
std::vector<float> random_small_integers(size_t n, int lo, int hi, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) {
    int i = 0;
    while (i == 0) i = dist(rng);
    x = static_cast<float>(i);
  }
  return v;
}
std::vector<uint8_t> to_e4m3(const std::vector<float>& v) {
  std::vector<uint8_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_e4m3(v[i]);
  return bits;
}

}  // namespace

TEST_CASE("ldmatrix and stmatrix x1 x2 x4 and .trans move 8x8 matrices in the fragment layout",
          "[gpu][layers][sanitize]") {
  std::mt19937_64 rng(101);
  std::uniform_int_distribution<int> bits(0, 0xfffe);  // never the 0xffff fill
  std::vector<uint16_t> src(256);
  for (uint16_t& v : src) v = static_cast<uint16_t>(bits(rng));
  std::vector<uint32_t> ld;
  std::vector<uint16_t> st;
  const std::string err = run_matrix_wrappers(src, &ld, &st);
  INFO(err);
  REQUIRE(err.empty());
  auto at = [&](int m, int row, int col) {
    return static_cast<uint32_t>(src[(8 * m + row) * 8 + col]);
  };
  for (int form = 0; form < kMatrixForms; ++form) {
    CAPTURE(form);
    const int count = matrix_count(form);
    const bool trans = matrix_trans(form);
    int wrong_ld = 0, wrong_st = 0;
    for (int lane = 0; lane < 32; ++lane)
      for (int m = 0; m < 4; ++m) {
        const uint32_t got = ld[(form * 32 + lane) * 4 + m];
        const int g = lane / 4, q = lane % 4;
        // Register m of lane l: (row l/4, cols 2q, 2q+1), or transposed (rows 2q, 2q+1, col l/4).
        const uint32_t want = m >= count ? 0xffffffffu
                              : trans    ? at(m, 2 * q, g) | (at(m, 2 * q + 1, g) << 16)
                                         : at(m, g, 2 * q) | (at(m, g, 2 * q + 1) << 16);
        wrong_ld += got != want;
      }
    for (int row = 0; row < 32; ++row)
      for (int col = 0; col < 8; ++col) {
        const int m = row / 8;
        // The stored fragments are matrix m's; .trans writes its transpose.
        const uint32_t want = m >= count ? 0xffffu
                              : trans    ? at(m, col, row % 8)
                                         : at(m, row % 8, col);
        wrong_st += st[form * 256 + row * 8 + col] != want;
      }
    CHECK(wrong_ld == 0);
    CHECK(wrong_st == 0);
  }
}

TEST_CASE("pack_e4m3x4 rounds to nearest even and saturates like cvt.rn.satfinite",
          "[gpu][layers][sanitize]") {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, -448.0f, 449.0f, 1e6f, -1e30f,
                          464.0f, 479.0f,
                          1.0625f,  // halfway between 1 and 1.125: ties to 1 (even)
                          1.1875f,  // halfway between 1.125 and 1.25: ties to 1.25
                          std::ldexp(1.0f, -9), std::ldexp(1.0f, -10), std::ldexp(3.0f, -11),
                          std::ldexp(1.5f, -9), 0.3f, -2.7f, 255.0f, 256.0f, 17.0f, 0.01f};
  std::mt19937_64 rng(103);
  std::normal_distribution<float> dist(0.0f, 30.0f);
  while (x.size() < 512) x.push_back(dist(rng));
  std::vector<uint32_t> packed;
  const std::string err = run_pack_e4m3(x, &packed);
  INFO(err);
  REQUIRE(err.empty());
  int wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t got = (packed[i / 4] >> (8 * (i % 4))) & 0xff;
    const uint32_t want = float_to_e4m3(x[i]);
    if (got != want) {
      ++wrong;
      UNSCOPED_INFO("x = " << x[i] << ": got 0x" << std::hex << got << ", want 0x" << want);
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("Accumulator stores: stmatrix into swizzled f16/bf16 tiles (also transposed) and pairs into f32",
          "[gpu][layers][sanitize]") {
  // (type, transposed): f16, bf16 both ways; f32 plain.
  const std::pair<int, bool> variant = GENERATE(std::make_pair(0, false), std::make_pair(0, true),
                                                std::make_pair(1, false), std::make_pair(1, true),
                                                std::make_pair(2, false));
  const int type = variant.first;
  const bool transposed = variant.second;
  CAPTURE(type, transposed);
  const int n = type == 2 ? 32 : 64;
  std::mt19937_64 rng(107 + type);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> acc(64 * n);
  for (float& v : acc) v = dist(rng);
  std::vector<uint32_t> tile;
  const std::string err = run_store_acc(type, transposed, acc, &tile);
  INFO(err);
  REQUIRE(err.empty());
  const int cols = type == 2 ? 64 : 128, rows = type == 2 ? 64 : 128;
  const int row0 = type == 2 ? 0 : 64, col0 = type == 2 ? 32 : 64;
  int wrong_stored = 0, wrong_untouched = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const uint32_t got = tile[r * cols + c];
      const int i = transposed ? c - col0 : r - row0, j = transposed ? r - row0 : c - col0;
      if (i >= 0 && i < 64 && j >= 0 && j < n) {
        const float v = acc[i * n + j];
        const uint32_t want = type == 2 ? float_bits(v) : to_16bit(v, type == 1);
        wrong_stored += got != want;
      } else {
        wrong_untouched += got != (type == 2 ? 0xffffffffu : 0xffffu);
      }
    }
  CHECK(wrong_stored == 0);
  CHECK(wrong_untouched == 0);
}

TEST_CASE("ldmatrix loads A operands of A and of A^T from swizzled tiles for an RS wgmma",
          "[gpu][layers][sanitize]") {
  std::mt19937_64 rng(109);
  std::vector<float> a, t, b;
  const auto a_bits = random_16bit(128 * 64, true, rng, &a);
  const auto t_bits = random_16bit(64 * 128, true, rng, &t);
  const auto b_bits = random_16bit(64 * 64, true, rng, &b);
  std::vector<float> c1, c2;
  const std::string err = run_ldmatrix_gemm(a_bits, t_bits, b_bits, &c1, &c2);
  INFO(err);
  REQUIRE(err.empty());
  std::vector<double> want1(64 * 64, 0.0), want2(64 * 64, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j)
      for (int k = 0; k < 64; ++k) {
        want1[i * 64 + j] += static_cast<double>(a[(64 + i) * 64 + k]) * b[j * 64 + k];
        want2[i * 64 + j] += static_cast<double>(t[k * 128 + 64 + i]) * b[j * 64 + k];
      }
  CHECK(max_abs_diff(c1, want1) < 1e-3);
  CHECK(max_abs_diff(c2, want2) < 1e-3);
}

TEST_CASE("e4m3 SS wgmma m64n224k32 computes A B^T", "[gpu][layers][sanitize]") {
  std::mt19937_64 rng(113);
  const std::vector<float> a = random_small_integers(64 * 128, -8, 8, rng);
  const std::vector<float> b = random_small_integers(224 * 128, -8, 8, rng);
  std::vector<float> c;
  const std::string err = run_gemm_ss_e4m3(to_e4m3(a), to_e4m3(b), &c);
  INFO(err);
  REQUIRE(err.empty());
  std::vector<double> want(64 * 224, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 224; ++j)
      for (int k = 0; k < 128; ++k) want[i * 224 + j] += a[i * 128 + k] * b[j * 128 + k];
  CHECK(max_abs_diff(c, want) == 0.0);
}

TEST_CASE("acc_to_a<e4m3> (cvt and FP8 byte order) feeds an m64n64k32 RS wgmma: P V",
          "[gpu][layers][sanitize]") {
  std::mt19937_64 rng(127);
  const std::vector<float> p = random_small_integers(64 * 224, 1, 8, rng);  // P~ >= 0
  const std::vector<float> v = random_small_integers(224 * 64, -8, 8, rng);  // 224 keys x 64
  std::vector<uint8_t> vt(64 * 224);  // V^T with each 16 keys in Fp8KOrder
  for (int n = 0; n < 64; ++n)
    for (int k = 0; k < 224; ++k)
      vt[n * 224 + k] = float_to_e4m3(v[fa3::tile::Fp8KOrder::key_at(k) * 64 + n]);
  std::vector<float> o;
  const std::string err = run_gemm_rs_e4m3(p, vt, &o);
  INFO(err);
  REQUIRE(err.empty());
  std::vector<double> want(64 * 64, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int n = 0; n < 64; ++n)
      for (int key = 0; key < 224; ++key) want[i * 64 + n] += p[i * 224 + key] * v[key * 64 + n];
  CHECK(max_abs_diff(o, want) == 0.0);
}

TEST_CASE("FP8 V transpose (ldmatrix.trans + prmt + stmatrix) writes V^T in Fp8KOrder for P V",
          "[gpu][layers][sanitize]") {
  std::mt19937_64 rng(131);
  const std::vector<float> p = random_small_integers(64 * 160, 1, 8, rng);
  std::vector<float> v;  // 160 keys x 128 dims: any e4m3 bytes for the transpose itself
  const std::vector<uint8_t> v_bits = random_e4m3(160 * 128, rng, &v);
  std::vector<uint8_t> vt;
  std::vector<float> o;
  std::string err = run_fp8_v_transpose(p, v_bits, &vt, &o);
  INFO(err);
  REQUIRE(err.empty());
  int wrong = 0;
  for (int n = 0; n < 128; ++n)
    for (int k = 0; k < 160; ++k)
      wrong += vt[n * 160 + k] != v_bits[fa3::tile::Fp8KOrder::key_at(k) * 128 + n];
  CHECK(wrong == 0);
  // Through the PV GEMM, with values whose products add exactly.
  const std::vector<float> v_int = random_small_integers(160 * 128, -8, 8, rng);
  err = run_fp8_v_transpose(p, to_e4m3(v_int), &vt, &o);
  REQUIRE(err.empty());
  std::vector<double> want(64 * 128, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int n = 0; n < 128; ++n)
      for (int key = 0; key < 160; ++key)
        want[i * 128 + n] += p[i * 160 + key] * v_int[key * 128 + n];
  CHECK(max_abs_diff(o, want) == 0.0);
}

TEST_CASE("SS wgmma with a transposed A and with an MN-major B: dV += P^T dO and dQ = dS K",
          "[gpu][layers][sanitize]") {
  std::mt19937_64 rng(137);
  std::vector<float> p, dout, ds, k;
  const auto p_bits = random_16bit(64 * 128, true, rng, &p);
  const auto dout_bits = random_16bit(64 * 64, true, rng, &dout);
  const auto ds_bits = random_16bit(64 * 128, false, rng, &ds);
  const auto k_bits = random_16bit(128 * 64, false, rng, &k);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> init(128 * 64);
  for (float& x : init) x = dist(rng);
  std::vector<float> dv, dq;
  const std::string err = run_backward_gemms(p_bits, dout_bits, init, ds_bits, k_bits, &dv, &dq);
  INFO(err);
  REQUIRE(err.empty());
  std::vector<double> want_dv(init.begin(), init.end()), want_dq(64 * 64, 0.0);
  for (int key = 0; key < 128; ++key)
    for (int d = 0; d < 64; ++d)
      for (int q = 0; q < 64; ++q)
        want_dv[key * 64 + d] += static_cast<double>(p[q * 128 + key]) * dout[q * 64 + d];
  for (int q = 0; q < 64; ++q)
    for (int d = 0; d < 64; ++d)
      for (int key = 0; key < 128; ++key)
        want_dq[q * 64 + d] += static_cast<double>(ds[q * 128 + key]) * k[key * 64 + d];
  CHECK(max_abs_diff(dv, want_dv) < 1e-3);
  CHECK(max_abs_diff(dq, want_dq) < 1e-3);
}

TEST_CASE("Bulk reduce-add: many CTAs add staged fp32 accumulators into one buffer exactly",
          "[gpu][layers][sanitize]") {
  const int ctas = 48, rows = 100;  // the row-major target: rows x 64 fp32, box 32 x 64
  std::mt19937_64 rng(139);
  // Multiples of 2^-6 below 64 in magnitude: every sum of 48 of them is exact in fp32, so
  // the order of the atomic adds cannot show.
  std::uniform_int_distribution<int> units(-4096, 4096);
  auto exact = [&] { return std::ldexp(static_cast<float>(units(rng)), -6); };
  std::vector<float> contrib(static_cast<size_t>(ctas) * 4096);
  std::vector<float> vec(static_cast<size_t>(ctas) * 256);
  for (float& x : contrib) x = exact();
  for (float& x : vec) x = exact();
  const int frag_tail = 64;  // poisoned floats after the fragment-order buffer
  std::vector<float> frag_init(4096 + frag_tail), vec_init(256), rows_init(128 * 64);
  for (float& x : frag_init) x = exact();
  for (float& x : vec_init) x = exact();
  for (float& x : rows_init) x = exact();
  const float poison = bits_float(0xffffffffu);
  for (int i = 4096; i < 4096 + frag_tail; ++i) frag_init[i] = poison;
  for (int i = rows * 64; i < 128 * 64; ++i) rows_init[i] = poison;  // past the tensor

  DeviceBuffer d_contrib(contrib.size() * 4), d_vec(vec.size() * 4), d_frag(frag_init.size() * 4),
      d_vec_sum(256 * 4), d_vec_copy(vec.size() * 4), d_rows(rows_init.size() * 4);
  d_contrib.upload(contrib.data(), contrib.size() * 4);
  d_vec.upload(vec.data(), vec.size() * 4);
  d_frag.upload(frag_init.data(), frag_init.size() * 4);
  d_vec_sum.upload(vec_init.data(), 256 * 4);
  d_vec_copy.poison();
  d_rows.upload(rows_init.data(), rows_init.size() * 4);

  const fa3::Driver d = load_driver();
  CUtensorMap map;
  const cuuint64_t dims[4] = {64, static_cast<cuuint64_t>(rows), 1, 1};
  const cuuint64_t strides[3] = {64 * 4, static_cast<cuuint64_t>(rows) * 64 * 4,
                                 static_cast<cuuint64_t>(rows) * 64 * 4};
  const cuuint32_t box[4] = {32, 64, 1, 1}, element_strides[4] = {1, 1, 1, 1};
  const CUresult r = d.tensor_map_encode_tiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, d_rows.get(), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  INFO(d.describe(r));
  REQUIRE(r == CUDA_SUCCESS);
  fa3::TensorMapBytes map_bytes;
  std::memcpy(&map_bytes, &map, sizeof map);

  const std::string err =
      run_bulk_reduce(ctas, d_contrib.as<float>(), d_vec.as<float>(), d_frag.as<float>(),
                      d_vec_sum.as<float>(), d_vec_copy.as<float>(), map_bytes);
  INFO(err);
  REQUIRE(err.empty());

  std::vector<float> frag(frag_init.size()), vec_sum(256), vec_copy(vec.size());
  std::vector<float> rows_out(rows_init.size());
  d_frag.download(frag.data(), frag.size() * 4);
  d_vec_sum.download(vec_sum.data(), 256 * 4);
  d_vec_copy.download(vec_copy.data(), vec_copy.size() * 4);
  d_rows.download(rows_out.data(), rows_out.size() * 4);

  using Staging = fa3::tile::AccFragmentOrder;
  int wrong_frag = 0, wrong_tail = 0, wrong_vec = 0, wrong_copy = 0, wrong_rows = 0;
  for (int i = 0; i < 4096; ++i) {
    float want = frag_init[i];  // exact sums: any order gives these bits
    for (int c = 0; c < ctas; ++c)
      want += contrib[c * 4096 + Staging::row_of(i) * 64 + Staging::col_of(i)];
    wrong_frag += frag[i] != want;
  }
  for (int i = 4096; i < 4096 + frag_tail; ++i) wrong_tail += float_bits(frag[i]) != 0xffffffffu;
  for (int i = 0; i < 256; ++i) {
    float want = vec_init[i];
    for (int c = 0; c < ctas; ++c) want += vec[c * 256 + i];
    wrong_vec += vec_sum[i] != want;
  }
  for (size_t i = 0; i < vec.size(); ++i) wrong_copy += vec_copy[i] != vec[i];
  for (int row = 0; row < 128; ++row)
    for (int col = 0; col < 64; ++col) {
      const int i = row * 64 + col;
      if (row >= rows) {
        wrong_tail += float_bits(rows_out[i]) != 0xffffffffu;
        continue;
      }
      float want = rows_init[i];
      for (int c = 0; c < ctas; ++c) {
        const int row0 = 30 * (c % 3);
        if (row >= row0 && row < row0 + 64) want += contrib[c * 4096 + (row - row0) * 64 + col];
      }
      wrong_rows += rows_out[i] != want;
    }
  CHECK(wrong_frag == 0);
  CHECK(wrong_vec == 0);
  CHECK(wrong_copy == 0);
  CHECK(wrong_rows == 0);
  CHECK(wrong_tail == 0);
}

TEST_CASE("Semaphore-ordered bulk reduce-adds give the sequential fp32 sum bit for bit",
          "[gpu][layers][sanitize]") {
  const int ctas = 32;
  std::mt19937_64 rng(149);
  // Magnitudes 2^-12 .. 2^20: fp32 sums of them depend on the order of the additions.
  std::uniform_int_distribution<int> exponent(-12, 20);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> add(ctas * 4), init(4);
  for (float& x : add) x = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
  for (float& x : init) x = mantissa(rng);
  std::vector<float> want = init, reversed = init;
  for (int c = 0; c < ctas; ++c)
    for (int j = 0; j < 4; ++j) {
      want[j] += add[c * 4 + j];
      reversed[j] += add[(ctas - 1 - c) * 4 + j];
    }
  REQUIRE(std::memcmp(want.data(), reversed.data(), 16) != 0);  // the test can see the order
  DeviceBuffer d_add(add.size() * 4), d_sum(16), d_counter(4);
  d_add.upload(add.data(), add.size() * 4);
  d_sum.upload(init.data(), 16);
  const int32_t zero = 0;
  d_counter.upload(&zero, 4);
  const std::string err = run_ordered_reduce(ctas, d_add.as<float>(), d_sum.as<float>(),
                                             d_counter.as<int32_t>());
  INFO(err);
  REQUIRE(err.empty());
  std::vector<float> sum(4);
  int32_t counter = -1;
  d_sum.download(sum.data(), 16);
  d_counter.download(&counter, 4);
  CHECK(counter == ctas);
  for (int j = 0; j < 4; ++j) CHECK(float_bits(sum[j]) == float_bits(want[j]));
}
