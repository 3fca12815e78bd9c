// fa3_forward on the GPU against the float64 reference, with the FlashAttention error rule:
// max |ours - ref64| <= 2 * max |plain - ref64| + 1e-5, where "plain" is attention computed in
// the input precision (S and P rounded to 16 bits). Fresh random inputs per case, outputs
// poisoned with NaN first, odd sizes, GQA, causal both ways, strided layouts.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "fa3/fa3.h"
#include "gpu_env.h"
#include "runtime/handle.h"
#include "runtime/kernel_registry.h"
#include "support/half.h"
#include "support/reference.h"

using namespace fa3test;

namespace {

enum class Layout {
  Contiguous,  // (B, S, H, D) for q, k, v, o
  PackedQkv,   // q, k, v are views of one (B, S, 3, H, D) buffer (needs sq == sk, h == hkv)
  PackedQkvo,  // q, k, v and o are views of one (B, S, 4, H, D) buffer: o interleaved with
               // the inputs it must not touch
  HeadsMajor,  // each tensor stored (B, H, S, D) and viewed as (B, S, H, D)
  PaddedOut,   // contiguous inputs; o rows padded (stride_seq = H*D + 64): padding untouched
};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::PackedQkv: return "packed-qkv";
    case Layout::PackedQkvo: return "packed-qkvo";
    case Layout::HeadsMajor: return "heads-major";
    case Layout::PaddedOut: return "padded-out";
  }
  return "?";
}

struct Case {
  bool bf16 = true;
  int head_dim = 128;
  bool causal = false;
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads = 1, heads_kv = 1;
  Layout layout = Layout::Contiguous;
  float scale = 0;  // 0: default
  bool with_lse = true;
  // Keys scaled by 1 + |key_ramp| * t, t from 0 to 1 along the sequence, growing toward the
  // last key (> 0) or the first (< 0): a row's scores then grow block after block in one
  // visiting order or the other, and the lazy row max (_cr, _im) has to move.
  float key_ramp = 0;

  std::string describe() const {
    std::ostringstream s;
    s << (bf16 ? "bf16" : "f16") << " d" << head_dim << (causal ? " causal" : "") << " B=" << batch
      << " Sq=" << seqlen_q << " Sk=" << seqlen_k << " H=" << heads << " Hkv=" << heads_kv << " "
      << layout_name(layout) << (scale != 0 ? " scale=" + std::to_string(scale) : "")
      << (with_lse ? "" : " no-lse")
      << (key_ramp != 0 ? " key-ramp=" + std::to_string(key_ramp) : "");
    return s.str();
  }
};

// Where one logical (B, S, H, D) tensor lives in a device buffer.
struct Placement {
  int64_t offset = 0;  // elements from the buffer start
  int64_t stride_batch = 0, stride_seq = 0, stride_head = 0;
  size_t index(int64_t b, int64_t s, int64_t h) const {
    return static_cast<size_t>(offset + b * stride_batch + s * stride_seq + h * stride_head);
  }
};

Placement contiguous(int64_t S, int64_t H, int64_t D) { return {0, S * H * D, H * D, D}; }
Placement heads_major(int64_t S, int64_t H, int64_t D) { return {0, H * S * D, D, S * D}; }

fa3_tensor describe_tensor(void* base, const Placement& p, bool bf16, int64_t B, int64_t S,
                           int64_t H, int64_t D) {
  fa3_tensor t{};
  t.data = static_cast<uint16_t*>(base) + p.offset;
  t.dtype = bf16 ? FA3_BF16 : FA3_F16;
  t.batch = B; t.seqlen = S; t.heads = H; t.head_dim = D;
  t.stride_batch = p.stride_batch; t.stride_seq = p.stride_seq; t.stride_head = p.stride_head;
  return t;
}

// Scatters logical (B, S, H, D) values into a buffer image at placement p.
void scatter(const std::vector<uint16_t>& logical, const Placement& p, int64_t B, int64_t S,
             int64_t H, int64_t D, std::vector<uint16_t>* image) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(&(*image)[p.index(b, s, h)], &logical[static_cast<size_t>(((b * S + s) * H + h) * D)],
                    static_cast<size_t>(D) * 2);
}

struct RowId {
  int64_t b, h, i;
};

// Every row when the reference is cheap enough, else a spread sample that includes the first
// and last rows of each sequence and the causal boundary region.
std::vector<RowId> rows_to_check(const Case& c) {
  std::vector<RowId> rows;
  const double cost = static_cast<double>(c.batch) * c.heads * c.seqlen_q * c.seqlen_k * c.head_dim;
  if (cost <= 6e9) {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = 0; i < c.seqlen_q; ++i) rows.push_back({b, h, i});
    return rows;
  }
  std::mt19937_64 rng(99);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i : {int64_t{0}, int64_t{1}, c.seqlen_q / 2, c.seqlen_q - 2, c.seqlen_q - 1})
        if (i >= 0 && i < c.seqlen_q) rows.push_back({b, h, i});
      for (int n = 0; n < 48; ++n)
        rows.push_back({b, h, static_cast<int64_t>(rng() % static_cast<uint64_t>(c.seqlen_q))});
    }
  return rows;
}

// Poisoned elements past the end of O's and the LSE's buffers: a store past the last row of
// a tail tile (or of the last (batch, head)) lands there.
constexpr size_t kGuardElements = 256;

// A defect written into the host copies of O and the LSE after a correct run, so that the
// test of the checks themselves sees each one fail (the negative controls).
enum class Tamper {
  None,
  Output,     // O's element (0, 0, 0, 0) has 1.0 added
  Lse,        // the LSE of (batch 0, head 0, row 0) has 1e-3 added (without an LSE: is 0,
              // where the poison must have stayed)
  Unwritten,  // O's last element and the LSE's last are NaN again
  EmptyRow,   // O's element (0, 0, 0, 0) is 1.0 (causal cases with seqlen_q > seqlen_k)
  Stray,      // the last guard elements of O's and the LSE's buffers are 0, and (padded
              // output) the first padding element after O's row (0, 0, H - 1)
};

struct Outcome {
  std::string error;  // a failed call or CUDA error; empty when the run completed
  double err_o = 0, plain_err_o = 0, err_lse = 0, plain_err_lse = 0;
  // unwritten_*: NaN left anywhere in O's view or the LSE (the whole tensors, not only the
  // rows compared); written_outside_*: the padding, other views' elements or the guard
  // changed; nonzero_empty_o: O of a row that sees no key not exactly 0.
  size_t unwritten_o = 0, unwritten_lse = 0, written_outside_o = 0, written_outside_lse = 0,
         nonzero_empty_o = 0;
  std::vector<uint16_t> o_bits;  // the whole output buffer image, for determinism checks
};

double worse(double current, double candidate) {
  if (std::isnan(candidate)) return INFINITY;
  return std::max(current, candidate);
}

class Runner {
 public:
  Runner() {
    const fa3_status s = fa3_create(&handle_, test_device(), nullptr);
    INFO(fa3_last_error());
    REQUIRE(s == FA3_OK);
  }

  // Runs one case; no Catch assertions inside (it also runs on worker threads).
  ~Runner() { fa3_destroy(handle_); }
  fa3_handle* handle() const { return handle_; }

  Outcome run(const Case& c, uint64_t seed, const char* kernel = nullptr,
              Tamper tamper = Tamper::None) {
    const int64_t B = c.batch, Sq = c.seqlen_q, Sk = c.seqlen_k, H = c.heads, Hk = c.heads_kv,
                  D = c.head_dim;
    std::mt19937_64 rng(seed);
    std::vector<float> qf, kf, vf;
    const auto qb = random_16bit(static_cast<size_t>(B * Sq * H * D), c.bf16, rng, &qf);
    auto kb = random_16bit(static_cast<size_t>(B * Sk * Hk * D), c.bf16, rng, &kf);
    if (c.key_ramp != 0) {
      for (size_t i = 0; i < kb.size(); ++i) {
        const int64_t j = static_cast<int64_t>(i / static_cast<size_t>(Hk * D)) % Sk;
        const double t = Sk > 1 ? static_cast<double>(c.key_ramp > 0 ? j : Sk - 1 - j) / (Sk - 1) : 0.0;
        kb[i] = to_16bit(static_cast<float>(kf[i] * (1.0 + std::fabs(c.key_ramp) * t)), c.bf16);
        kf[i] = from_16bit(kb[i], c.bf16);
      }
    }
    const auto vb = random_16bit(static_cast<size_t>(B * Sk * Hk * D), c.bf16, rng, &vf);

    Placement pq = contiguous(Sq, H, D), pk = contiguous(Sk, Hk, D), pv = pk, po = pq;
    size_t in_elems = 0, q_elems = static_cast<size_t>(B * Sq * H * D);
    Outcome r;
    const bool packed_o = c.layout == Layout::PackedQkvo;
    const bool packed = c.layout == Layout::PackedQkv || packed_o;
    if (packed) {
      if (Sq != Sk || H != Hk) {
        r.error = "a packed layout needs seqlen_q == seqlen_k and heads == heads_kv";
        return r;
      }
      const int64_t slots = packed_o ? 4 : 3;
      const Placement views{0, Sq * slots * H * D, slots * H * D, D};
      pq = views;
      pk = views; pk.offset = H * D;
      pv = views; pv.offset = 2 * H * D;
      if (packed_o) {
        po = views;
        po.offset = 3 * H * D;
      }
      in_elems = static_cast<size_t>(B * Sq * slots * H * D);
    } else if (c.layout == Layout::HeadsMajor) {
      pq = heads_major(Sq, H, D); pk = heads_major(Sk, Hk, D); pv = pk; po = pq;
    } else if (c.layout == Layout::PaddedOut) {
      po = {0, Sq * (H * D + 64), H * D + 64, D};
    }
    if (!packed) {
      in_elems = q_elems + 2 * static_cast<size_t>(B * Sk * Hk * D);
      pk.offset = static_cast<int64_t>(q_elems);
      pv.offset = pk.offset + B * Sk * Hk * D;
    }
    const size_t out_elems = c.layout == Layout::PaddedOut ? static_cast<size_t>(B * Sq * (H * D + 64))
                             : packed_o                    ? in_elems
                                                           : q_elems;

    // o's slots of a packed buffer poisoned as a separate o is (0xffff: NaN), and so is the
    // guard after whichever buffer holds o.
    const size_t image_elems = in_elems + (packed_o ? kGuardElements : 0);
    std::vector<uint16_t> image(image_elems, packed_o ? 0xffff : 0);
    scatter(qb, pq, B, Sq, H, D, &image);
    scatter(kb, pk, B, Sk, Hk, D, &image);
    scatter(vb, pv, B, Sk, Hk, D, &image);
    const size_t lse_elems = static_cast<size_t>(B * H * Sq);
    DeviceBuffer inputs(image_elems * 2), out(packed_o ? 0 : (out_elems + kGuardElements) * 2),
        lse((lse_elems + kGuardElements) * 4);
    inputs.upload(image.data(), image_elems * 2);
    if (!packed_o) out.poison();
    lse.poison();

    const fa3_tensor q = describe_tensor(inputs.get(), pq, c.bf16, B, Sq, H, D);
    const fa3_tensor k = describe_tensor(inputs.get(), pk, c.bf16, B, Sk, Hk, D);
    const fa3_tensor v = describe_tensor(inputs.get(), pv, c.bf16, B, Sk, Hk, D);
    fa3_tensor o = describe_tensor(packed_o ? inputs.get() : out.get(), po, c.bf16, B, Sq, H, D);
    const fa3_params params{c.scale, c.causal ? 1 : 0, 0};
    float* lse_ptr = c.with_lse ? lse.as<float>() : nullptr;
    const fa3_status s = kernel ? fa3_forward_with_kernel(handle_, kernel, &q, &k, &v, &o, lse_ptr, &params, nullptr)
                                : fa3_forward(handle_, &q, &k, &v, &o, lse_ptr, &params, nullptr);
    if (s != FA3_OK) {
      r.error = std::string(fa3_status_string(s)) + ": " + fa3_last_error();
      return r;
    }
    cuda_check(cudaDeviceSynchronize(), "fa3_forward");

    r.o_bits.resize(out_elems + kGuardElements);
    (packed_o ? inputs : out).download(r.o_bits.data(), r.o_bits.size() * 2);
    std::vector<uint32_t> lse_bits(lse_elems + kGuardElements);
    lse.download(lse_bits.data(), lse_bits.size() * 4);
    const size_t first_o = po.index(0, 0, 0), last_o = po.index(B - 1, Sq - 1, H - 1) + static_cast<size_t>(D - 1);
    auto add_to_lse = [&](size_t at, float delta) {
      float x;
      std::memcpy(&x, &lse_bits[at], 4);
      x += delta;
      std::memcpy(&lse_bits[at], &x, 4);
    };
    switch (tamper) {
      case Tamper::None: break;
      case Tamper::Output:
        r.o_bits[first_o] = to_16bit(from_16bit(r.o_bits[first_o], c.bf16) + 1.0f, c.bf16);
        break;
      case Tamper::Lse:
        if (c.with_lse) add_to_lse(0, 1e-3f);
        else lse_bits[0] = 0;
        break;
      case Tamper::Unwritten:
        r.o_bits[last_o] = 0xffff;
        lse_bits[lse_elems - 1] = 0xffffffffu;
        break;
      case Tamper::EmptyRow: r.o_bits[first_o] = to_16bit(1.0f, c.bf16); break;
      case Tamper::Stray:
        r.o_bits.back() = 0;
        lse_bits.back() = 0;
        if (c.layout == Layout::PaddedOut) r.o_bits[po.index(0, 0, H - 1) + static_cast<size_t>(D)] = 0;
        break;
    }
    for (size_t i = out_elems; i < r.o_bits.size(); ++i) r.written_outside_o += r.o_bits[i] != 0xffff;
    r.o_bits.resize(out_elems);
    for (size_t i = lse_elems; i < lse_bits.size(); ++i) r.written_outside_lse += lse_bits[i] != 0xffffffffu;
    std::vector<float> lse_out(lse_elems);
    std::memcpy(lse_out.data(), lse_bits.data(), lse_elems * 4);
    // Every element of O's view and of the LSE, not only the rows compared below: a tile the
    // kernel skipped leaves its poison.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s2 = 0; s2 < Sq; ++s2)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t x = 0; x < D; ++x)
            r.unwritten_o += std::isnan(from_16bit(r.o_bits[po.index(b, s2, h) + static_cast<size_t>(x)], c.bf16));
    if (c.with_lse)
      for (float x : lse_out) r.unwritten_lse += std::isnan(x);

    if (c.layout == Layout::PaddedOut)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s2 = 0; s2 < Sq; ++s2)
          for (int64_t x = 0; x < 64; ++x)
            r.written_outside_o += r.o_bits[po.index(b, s2, H - 1) + D + x] != 0xffff;
    if (packed_o)  // q, k and v's slots hold what was uploaded
      for (size_t i = 0; i < in_elems; ++i)
        r.written_outside_o += static_cast<int64_t>(i) % (4 * H * D) < 3 * H * D && r.o_bits[i] != image[i];
    if (!c.with_lse)
      for (float x : lse_out) r.unwritten_lse += !std::isnan(x);  // must stay poisoned

    fa3test::AttentionShape shape;
    shape.batch = B; shape.seqlen_q = Sq; shape.seqlen_k = Sk; shape.heads = H;
    shape.heads_kv = Hk; shape.head_dim = D; shape.causal = c.causal; shape.scale = c.scale;
    const std::vector<RowId> rows = rows_to_check(c);
    std::vector<Outcome> per_row(rows.size());
    parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t idx) {
      const RowId& id = rows[static_cast<size_t>(idx)];
      std::vector<double> ref(static_cast<size_t>(D));
      std::vector<float> plain(static_cast<size_t>(D));
      double ref_lse;
      float plain_lse;
      reference_row(shape, qf.data(), kf.data(), vf.data(), id.b, id.h, id.i, ref.data(), &ref_lse);
      plain_row(shape, qf.data(), kf.data(), vf.data(), id.b, id.h, id.i, c.bf16, plain.data(), &plain_lse);
      Outcome& out_row = per_row[static_cast<size_t>(idx)];
      const size_t base = po.index(id.b, id.i, id.h);
      for (int64_t x = 0; x < D; ++x) {
        const float got = from_16bit(r.o_bits[base + static_cast<size_t>(x)], c.bf16);
        if (std::isinf(ref_lse) && got != 0.0f) ++out_row.nonzero_empty_o;  // no key: O = 0
        out_row.err_o = worse(out_row.err_o, std::fabs(got - ref[static_cast<size_t>(x)]));
        out_row.plain_err_o = worse(out_row.plain_err_o, std::fabs(plain[static_cast<size_t>(x)] - ref[static_cast<size_t>(x)]));
      }
      if (c.with_lse) {
        const float got = lse_out[static_cast<size_t>((id.b * H + id.h) * Sq + id.i)];
        if (std::isinf(ref_lse)) {
          out_row.err_lse = (std::isinf(got) && got < 0) ? 0.0 : INFINITY;
        } else {
          out_row.err_lse = worse(0, std::fabs(got - ref_lse));
          out_row.plain_err_lse = worse(0, std::fabs(plain_lse - ref_lse));
        }
      }
    });
    for (const Outcome& x : per_row) {
      r.err_o = worse(r.err_o, x.err_o);
      r.plain_err_o = worse(r.plain_err_o, x.plain_err_o);
      r.err_lse = worse(r.err_lse, x.err_lse);
      r.plain_err_lse = worse(r.plain_err_lse, x.plain_err_lse);
      r.nonzero_empty_o += x.nonzero_empty_o;
    }
    return r;
  }

 private:
  fa3_handle* handle_ = nullptr;
};

// The LSE's bound against float64 (natural log), whatever the dtype: the backward recomputes
// P = exp(S - LSE) from it, and merged partial results (split-K/V, ring attention) are
// weighted by exp(LSE). It is not held to the plain same-precision attention, whose LSE
// shares the 16-bit rounding the bound must exclude.
constexpr double kLseBound = 1e-4;

void check_outcome(const Outcome& r) {
  INFO(r.error);
  REQUIRE(r.error.empty());
  CAPTURE(r.err_o, r.plain_err_o, r.err_lse, r.plain_err_lse);
  CHECK(r.unwritten_o == 0);
  CHECK(r.unwritten_lse == 0);
  CHECK(r.written_outside_o == 0);
  CHECK(r.written_outside_lse == 0);
  CHECK(r.nonzero_empty_o == 0);
  // The FlashAttention rule; a plain error that is not finite (NaN maps to infinity in
  // worse()) bounds nothing.
  CHECK((std::isfinite(r.plain_err_o) && r.err_o <= 2 * r.plain_err_o + 1e-5));
  CHECK(r.err_lse <= kLseBound);
}

struct Shape {
  int64_t batch, seqlen_q, seqlen_k, heads, heads_kv;
  Layout layout;
};

// The shapes every (dtype, head_dim, causal) combination runs.
const Shape kShapes[] = {
    {1, 1, 1, 2, 2, Layout::Contiguous},
    {2, 17, 17, 4, 2, Layout::Contiguous},       // GQA 2
    {2, 200, 300, 6, 2, Layout::Contiguous},     // GQA 3: a divisor that is not a power of 2
    {1, 127, 127, 8, 8, Layout::PackedQkvo},    // o interleaved with q, k and v
    {3, 1000, 1000, 2, 2, Layout::PackedQkv},    // packed QKV strides, batch 3
    {1, 113, 1000, 8, 8, Layout::HeadsMajor},    // seqlen_q < seqlen_k
    {2, 1000, 113, 2, 1, Layout::Contiguous},    // seqlen_q > seqlen_k: causal rows with no key
    {1, 1, 1000, 8, 1, Layout::PaddedOut},       // one query row (decoding)
    {1, 1000, 1, 2, 2, Layout::Contiguous},      // one key
    {1, 4097, 4097, 8, 1, Layout::Contiguous},   // long, MQA (GQA 8)
};

// A compiled kernel's config, read from its name as the library reads it.
fa3::FwdConfig config_of(const std::string& name) {
  const std::optional<fa3::FwdConfig> config = fa3::parse_fwd_kernel_name(name);
  REQUIRE(config);
  return *config;
}

// Whether FA3_TEST_KERNELS narrows the kernels (forward_kernels_to_test).
bool kernels_narrowed() {
  const char* env = std::getenv("FA3_TEST_KERNELS");
  return env && *env;
}

// A test that picks some of the kernels ran `tested` of them: none is a failure, unless
// FA3_TEST_KERNELS left none of the kind out (then it says so).
void require_some_kernels(int tested, const char* kind) {
  if (tested > 0) return;
  if (kernels_narrowed()) {
    WARN("FA3_TEST_KERNELS leaves no " << kind << " kernel: this test checked none");
    return;
  }
  FAIL("no compiled " << kind << " kernel: this test would check nothing");
}

// The compiled forward kernels, in registry order. FA3_TEST_KERNELS=A,B,... narrows them to
// the kernels whose names contain one of the substrings (a first, short check of new
// kernels); the run then says so, and is not the whole test.
std::vector<std::string> forward_kernels_to_test() {
  std::vector<std::string> only;
  if (kernels_narrowed()) {
    const char* env = std::getenv("FA3_TEST_KERNELS");
    std::stringstream list(env);
    for (std::string part; std::getline(list, part, ',');)
      if (!part.empty()) only.push_back(part);
    WARN("FA3_TEST_KERNELS=" << env << ": only the kernels whose names contain one of these");
  }
  std::vector<std::string> names;
  for (int i = 0; i < fa3_kernel_count(); ++i) {
    const std::string name = fa3_kernel_name(i);
    if (name.rfind("fa3_fwd_", 0) != 0) continue;
    if (!only.empty() && std::none_of(only.begin(), only.end(), [&](const std::string& part) {
          return name.find(part) != std::string::npos;
        }))
      continue;
    names.push_back(name);
  }
  // A test looping over no kernel would pass with no assertion (Catch2 v2 counts it passed).
  INFO("no compiled forward kernel" << (only.empty() ? "" : " matches FA3_TEST_KERNELS"));
  REQUIRE(!names.empty());
  return names;
}

}  // namespace

TEST_CASE("fa3_forward matches the float64 reference", "[gpu][forward]") {
  Runner runner;
  const bool bf16 = GENERATE(false, true);
  const int head_dim = GENERATE(64, 128, 256);
  const bool causal = GENERATE(false, true);
  // Calls without an LSE run the table's _ls picks (d64, d128), calls with one their twins.
  const bool with_lse = GENERATE(true, false);
  uint64_t seed = 1000 + static_cast<uint64_t>(head_dim) * 8 + (bf16 ? 4 : 0) + (causal ? 2 : 0) +
                  (with_lse ? 1 : 0);
  for (Shape s : kShapes) {
    Case c;
    c.bf16 = bf16; c.head_dim = head_dim; c.causal = causal; c.with_lse = with_lse;
    c.batch = s.batch; c.seqlen_q = s.seqlen_q; c.seqlen_k = s.seqlen_k;
    c.heads = s.heads; c.heads_kv = s.heads_kv; c.layout = s.layout;
    INFO(c.describe());
    check_outcome(runner.run(c, seed));
    seed += 7919;
  }
}

TEST_CASE("the checks fail on a tampered O and LSE (negative controls)", "[gpu][forward]") {
  // Each check of check_outcome sees its defect: O or the LSE off, an element left NaN, a
  // row that sees no key with a non-zero O, writes into the padding or past a buffer's end.
  Runner runner;
  Case c;
  c.bf16 = true; c.head_dim = 128; c.batch = 2; c.seqlen_q = 300; c.seqlen_k = 200;
  c.heads = 4; c.heads_kv = 2;
  uint64_t seed = 4242;
  auto o_within_rule = [](const Outcome& r) {
    return std::isfinite(r.plain_err_o) && r.err_o <= 2 * r.plain_err_o + 1e-5;
  };
  for (const Layout layout : {Layout::PaddedOut, Layout::Contiguous}) {
    c.layout = layout;
    INFO(c.describe());
    check_outcome(runner.run(c, seed));
    const Outcome off = runner.run(c, seed, nullptr, Tamper::Output);
    REQUIRE(off.error.empty());
    CHECK_FALSE(o_within_rule(off));
    CHECK(off.err_lse <= kLseBound);
    CHECK(off.unwritten_o == 0);
    const Outcome lse_off = runner.run(c, seed, nullptr, Tamper::Lse);
    CHECK(lse_off.err_lse > kLseBound);
    CHECK(o_within_rule(lse_off));
    const Outcome unwritten = runner.run(c, seed, nullptr, Tamper::Unwritten);
    CHECK(unwritten.unwritten_o == 1);
    CHECK(unwritten.unwritten_lse == 1);
    const Outcome stray = runner.run(c, seed, nullptr, Tamper::Stray);
    CHECK(stray.written_outside_o == (layout == Layout::PaddedOut ? 2u : 1u));
    CHECK(stray.written_outside_lse == 1);
    ++seed;
  }
  // Causal with seqlen_q > seqlen_k: query row 0 sees no key.
  c.causal = true;
  c.layout = Layout::Contiguous;
  INFO(c.describe());
  check_outcome(runner.run(c, seed));
  CHECK(runner.run(c, seed, nullptr, Tamper::EmptyRow).nonzero_empty_o == 1);
  // Without an LSE the LSE's buffer must stay poisoned: a written element counts.
  c.with_lse = false;
  check_outcome(runner.run(c, seed));
  CHECK(runner.run(c, seed, nullptr, Tamper::Lse).unwritten_lse == 1);
}

TEST_CASE("fa3_forward honours softmax_scale and a NULL lse", "[gpu][forward]") {
  Runner runner;
  Case c;
  c.bf16 = true; c.head_dim = 128; c.causal = true; c.batch = 2; c.seqlen_q = 300;
  c.seqlen_k = 517; c.heads = 4; c.heads_kv = 2; c.scale = 0.3f;
  INFO(c.describe());
  check_outcome(runner.run(c, 5));
  c.with_lse = false;
  c.scale = 0;
  INFO(c.describe());
  check_outcome(runner.run(c, 6));
}

TEST_CASE("every compiled forward kernel matches the reference", "[gpu][forward][kernels]") {
  // Each kernel on shapes that exercise its masking paths differently: more keys than
  // queries, square (the causal diagonal inside the block rows), fewer keys than queries
  // (causal rows with no key), a sequence shorter than one key block, and more tiles than an
  // H100/H200 has SMs (a persistent kernel's CTAs then walk several tiles each).
  struct KernelShape {
    int64_t batch, seqlen_q, seqlen_k, heads, heads_kv;
  };
  const KernelShape shapes[] = {{2, 777, 1029, 4, 2}, {1, 1000, 1000, 2, 1}, {1, 1030, 500, 2, 2},
                                {3, 80, 80, 2, 2}, {4, 1100, 700, 8, 2}};
  Runner runner;
  uint64_t seed = 77;
  for (const std::string& name : forward_kernels_to_test()) {
    const fa3::FwdConfig config = config_of(name);
    // A kernel with the row sums by the PV GEMM runs for calls without an LSE; a call with
    // one runs its twin: both are checked.
    for (const bool with_lse : {true, false}) {
      if (!with_lse && !config.row_sum_mma) continue;
      for (const KernelShape& shape : shapes) {
        Case c;
        c.bf16 = config.dtype == fa3::DType::BF16;
        c.head_dim = config.head_dim;
        c.causal = config.causal;
        c.batch = shape.batch; c.seqlen_q = shape.seqlen_q; c.seqlen_k = shape.seqlen_k;
        c.heads = shape.heads; c.heads_kv = shape.heads_kv;
        c.with_lse = with_lse;
        INFO(name << ": " << c.describe());
        check_outcome(runner.run(c, seed++, name.c_str()));
      }
    }
  }
}

TEST_CASE("kernels with a lazy row max follow rows whose scores keep growing",
          "[gpu][forward][kernels]") {
  // The random inputs above seldom move a lazy max after the first block (a row's scores
  // are ~N(0, 1.4) in the log2 domain, the test waits for growth by 8). Keys scaled up along
  // the sequence, either way, make a row's max grow by ~4 per key block in the visiting
  // order of one direction or the other, so every _cr kernel rescales O and l mid-tile
  // many times (in _im kernels, on the integer maxima).
  Runner runner;
  uint64_t seed = 9090;
  int tested = 0;
  for (const std::string& name : forward_kernels_to_test()) {
    const fa3::FwdConfig config = config_of(name);
    if (!config.conditional_rescale()) continue;
    ++tested;
    // (A moved max rescales l too: for an _ls kernel, the PV GEMM's l, in calls without an
    // LSE.)
    for (const bool with_lse : {true, false}) {
      if (!with_lse && !config.row_sum_mma) continue;
      for (const float ramp : {12.0f, -12.0f}) {
        Case c;
        c.with_lse = with_lse;
        c.bf16 = config.dtype == fa3::DType::BF16;
        c.head_dim = config.head_dim;
        c.causal = config.causal;
        c.batch = 1; c.seqlen_q = 300; c.seqlen_k = 1000; c.heads = 2; c.heads_kv = 1;
        c.key_ramp = ramp;
        INFO(name << ": " << c.describe());
        check_outcome(runner.run(c, seed++, name.c_str()));
      }
    }
  }
  require_some_kernels(tested, "lazy row max (_cr)");
}

TEST_CASE("every kernel's LSE is within 1e-4 of float64 where a few keys dominate a row",
          "[gpu][forward][kernels]") {
  // Rows whose sum is made of a few terms are where 16-bit rounding of P~ would show in l:
  // scores scaled up (softmax_scale 4/sqrt(d): a row's largest scores are apart by several
  // units of log), causal rows near the top of the sequence (1, 2, 3... keys), and a
  // sequence of three keys. The FADD row sums of fp32 P~ keep the LSE within kLseBound; sums
  // of P~ rounded to bf16 (the removed _ls kernels) were off by up to 1.6e-3.
  Runner runner;
  uint64_t seed = 4242;
  for (const std::string& name : forward_kernels_to_test()) {
    const fa3::FwdConfig config = config_of(name);
    struct Few {
      int64_t seqlen_q, seqlen_k;
      float scale_times_sqrt_d;
    };
    for (const Few few : {Few{300, 300, 4.0f}, Few{70, 3, 4.0f}, Few{257, 257, 1.0f}}) {
      Case c;
      c.bf16 = config.dtype == fa3::DType::BF16;
      c.head_dim = config.head_dim;
      c.causal = config.causal;
      c.batch = 1; c.seqlen_q = few.seqlen_q; c.seqlen_k = few.seqlen_k; c.heads = 2;
      c.heads_kv = 1;
      c.scale = few.scale_times_sqrt_d / std::sqrt(static_cast<float>(c.head_dim));
      INFO(name << ": " << c.describe());
      check_outcome(runner.run(c, seed++, name.c_str()));
    }
  }
}

TEST_CASE("causal persistent kernels walk their L2 groups, the last one short",
          "[gpu][forward][kernels]") {
  // The causal persistent scheduler hands out tiles in groups of l2_group (batch, head)
  // pairs (causal_l2_group in forward_launch.cpp). The shapes above never need more than
  // one group. Here 2 query blocks ask for ~68 pairs (a tile per SM), more than the 8 MiB
  // term (4 * seqlen_k * head_dim = 2 MiB of K and V per K/V head, shared by 3 query heads:
  // 11 pairs), so the group is the largest power of two within 3 x 6 = 18 pairs, 16, with a
  // last group of 2; GQA 3 divides heads by a divisor that is not a power of two.
  Runner runner;
  uint64_t seed = 5353;
  int tested = 0;
  for (const std::string& name : forward_kernels_to_test()) {
    const fa3::FwdConfig config = config_of(name);
    if (!config.persistent() || !config.causal) continue;
    ++tested;
    Case c;
    c.bf16 = config.dtype == fa3::DType::BF16;
    c.head_dim = config.head_dim;
    c.causal = true;
    c.batch = 3; c.heads = 6; c.heads_kv = 2;
    c.seqlen_q = 200;
    c.seqlen_k = (int64_t{2} << 20) / (4 * c.head_dim);
    INFO(name << ": " << c.describe());
    check_outcome(runner.run(c, seed++, name.c_str()));
  }
  require_some_kernels(tested, "causal persistent");
}

TEST_CASE("fa3_forward is deterministic", "[gpu][forward]") {
  Runner runner;
  Case c;
  c.bf16 = false; c.head_dim = 64; c.causal = true; c.batch = 2; c.seqlen_q = 2049;
  c.seqlen_k = 2049; c.heads = 6; c.heads_kv = 3;
  const Outcome a = runner.run(c, 31), b = runner.run(c, 31);
  check_outcome(a);
  CHECK(a.o_bits == b.o_bits);
}

TEST_CASE("fa3_forward from several threads at once on one handle", "[gpu][forward]") {
  Runner runner;
  // Fresh handle: the first calls race to load the same kernels.
  std::vector<std::thread> threads;
  std::vector<Outcome> results(4);
  std::vector<std::string> failures(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      cudaSetDevice(test_device());
      Case c;
      c.bf16 = t % 2 == 0; c.head_dim = 128; c.causal = t >= 2; c.batch = 1; c.seqlen_q = 257;
      c.seqlen_k = 257; c.heads = 2; c.heads_kv = 2;
      try {
        results[static_cast<size_t>(t)] = runner.run(c, 500 + static_cast<uint64_t>(t));
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(t)] = e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    INFO("thread " << t << ": " << failures[static_cast<size_t>(t)]);
    CHECK(failures[static_cast<size_t>(t)].empty());
    check_outcome(results[static_cast<size_t>(t)]);
  }
}

namespace {
void CUDART_CB sleep_half_a_second(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
}
}  // namespace

TEST_CASE("a first tile-drawing call on a non-blocking stream finds its counters zeroed",
          "[gpu][forward]") {
  // A tile-drawing call on a stream new to the handle's context takes a counter from a block
  // of 1024, allocating the block when the last one is used up. Its zeros must be in place
  // before that call's kernel runs on the caller's stream, even one created non-blocking (as
  // PyTorch's side streams are) while the legacy default stream is held up, here by a host
  // function sleeping 500 ms. The first block is used up by 1024 streams first (so the module
  // is loaded: a first load may wait for the device), then freed 4 KB blocks filled with 0x40
  // bytes are made: a block the driver hands out again holds counters of ~1.1e9 (every draw
  // out of range: tiles skipped, O left NaN) unless zeroed in time. With both (a reused block,
  // a call that did not wait) a late zeroing cannot pass: the legacy stream ran nothing then.
  std::string name;
  for (const std::string& candidate : forward_kernels_to_test()) {
    const fa3::FwdConfig config = config_of(candidate);
    if (config.draws_tiles() && config.head_dim == 128 && config.dtype == fa3::DType::BF16) {
      name = candidate;
      break;
    }
  }
  if (name.empty()) {
    require_some_kernels(0, "bf16 d128 tile-drawing");
    return;
  }
  INFO(name);
  const fa3::FwdConfig config = config_of(name);
  const int64_t B = 2, S = 2048, H = 16, D = 128;  // 512 tiles of 128 rows: > one per SM
  const size_t elems = static_cast<size_t>(B * S * H * D);
  std::mt19937_64 rng(8080);
  std::vector<float> unused;
  DeviceBuffer q(elems * 2), k(elems * 2), v(elems * 2), o(elems * 2);
  for (DeviceBuffer* b : {&q, &k, &v}) b->upload(random_16bit(elems, true, rng, &unused).data(), elems * 2);
  o.poison();
  const Placement p = contiguous(S, H, D);
  const fa3_tensor tq = describe_tensor(q.get(), p, true, B, S, H, D), tk = describe_tensor(k.get(), p, true, B, S, H, D),
                   tv = describe_tensor(v.get(), p, true, B, S, H, D);
  fa3_tensor to = describe_tensor(o.get(), p, true, B, S, H, D);
  const fa3_params params{0, config.causal ? 1 : 0, 0};

  fa3_handle* h = nullptr;
  REQUIRE(fa3_create(&h, test_device(), nullptr) == FA3_OK);
  std::vector<cudaStream_t> used(1024);
  for (cudaStream_t& s : used) {
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    REQUIRE(fa3_forward_with_kernel(h, name.c_str(), &tq, &tk, &tv, &to, nullptr, &params, s) == FA3_OK);
  }
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (cudaStream_t s : used) cuda_check(cudaStreamDestroy(s), "cudaStreamDestroy");
  REQUIRE(h->counter_chunks.size() == 1);
  o.poison();
  std::vector<void*> freed(256);
  for (void*& block : freed) {
    cuda_check(cudaMalloc(&block, 4096), "cudaMalloc");
    cuda_check(cudaMemset(block, 0x40, 4096), "cudaMemset");
  }
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (void* block : freed) cuda_check(cudaFree(block), "cudaFree");

  cuda_check(cudaLaunchHostFunc(cudaStreamLegacy, sleep_half_a_second, nullptr), "cudaLaunchHostFunc");
  const auto start = std::chrono::steady_clock::now();
  const fa3_status status = fa3_forward_with_kernel(h, name.c_str(), &tq, &tk, &tv, &to, nullptr, &params, stream);
  INFO(fa3_last_error());
  CHECK(status == FA3_OK);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<uint16_t> first(elems), again(elems);
  o.download(first.data(), elems * 2);  // on the legacy stream: after the host function
  // The case only discriminates when the kernel ran while the legacy stream was held up and
  // the counters reuse a poisoned block; say so when either did not happen.
  bool reused = false;
  REQUIRE(h->counter_chunks.size() == 2);
  for (void* block : freed) reused |= h->counter_chunks[1].base == reinterpret_cast<CUdeviceptr>(block);
  if (!reused) WARN("the counters' block is no freed, poisoned block: this run cannot tell a late zeroing");
  if (ms >= 450) WARN("the call waited for the legacy stream (" << ms << " ms)");
  size_t unwritten = 0;
  for (uint16_t x : first) unwritten += std::isnan(from_16bit(x, true));
  CHECK(unwritten == 0);
  o.poison();
  CHECK(fa3_forward_with_kernel(h, name.c_str(), &tq, &tk, &tv, &to, nullptr, &params, stream) == FA3_OK);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  o.download(again.data(), elems * 2);
  size_t differing = 0;  // counted: Catch would print both 8M-element vectors
  for (size_t i = 0; i < elems; ++i) differing += first[i] != again[i];
  CHECK(differing == 0);
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  fa3_destroy(h);
}

TEST_CASE("one handle in contexts made one after another at the same address",
          "[gpu][forward]") {
  // The driver hands a destroyed context's address to the next context it makes. A handle's
  // kernels and tile counters of the destroyed context are gone with it, so the handle must
  // load them afresh in the new one (it keys them by cuCtxGetId, not the address). Contexts
  // are made until one lands at an address seen before (the H200 did within 6).
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(cuda != nullptr);
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using CtxCreate = CUresult (*)(CUcontext*, unsigned int, CUdevice);  // the _v2 ABI
  using CtxDestroy = CUresult (*)(CUcontext);
  const auto device_get = reinterpret_cast<DeviceGet>(dlsym(cuda, "cuDeviceGet"));
  const auto ctx_create = reinterpret_cast<CtxCreate>(dlsym(cuda, "cuCtxCreate_v2"));
  const auto ctx_destroy = reinterpret_cast<CtxDestroy>(dlsym(cuda, "cuCtxDestroy_v2"));
  REQUIRE((device_get && ctx_create && ctx_destroy));
  CUdevice device = 0;
  REQUIRE(device_get(&device, test_device()) == CUDA_SUCCESS);
  Runner runner;  // one handle for every context
  Case c;
  c.bf16 = true; c.head_dim = 128; c.causal = true;  // the table's causal picks draw tiles
  c.batch = 2; c.seqlen_q = 700; c.seqlen_k = 700; c.heads = 4; c.heads_kv = 2;
  std::vector<CUcontext> seen;
  bool again = false;
  uint64_t seed = 9191;
  for (int made = 0; made < 24 && !again; ++made) {
    CUcontext context = nullptr;
    REQUIRE(ctx_create(&context, 0, device) == CUDA_SUCCESS);  // current on this thread now
    again = std::find(seen.begin(), seen.end(), context) != seen.end();
    seen.push_back(context);
    INFO("context " << made << (again ? ", at an address seen before" : ""));
    check_outcome(runner.run(c, seed++));  // its buffers freed before the context goes
    c.with_lse = !c.with_lse;
    REQUIRE(ctx_destroy(context) == CUDA_SUCCESS);  // popped: the primary context is current
  }
  if (!again) WARN("no context landed at a destroyed one's address in " << seen.size() << " made");
  check_outcome(runner.run(c, seed));  // and the primary context still works
}

TEST_CASE("the dynamic tile scheduler: back-to-back launches and concurrent streams",
          "[gpu][forward]") {
  // Causal persistent kernels draw tiles from a per-stream counter that every launch leaves
  // at 0. Launches queued back to back in one stream, and in three streams at once, must all
  // compute every tile: each output must be bitwise the one of a lone launch.
  // A compiled bf16 d128 causal kernel that draws its tiles (any build has one: the table
  // picks them for causal d128).
  std::string kernel_name;
  for (const std::string& name : forward_kernels_to_test()) {
    const fa3::FwdConfig config = config_of(name);
    if (config.dtype == fa3::DType::BF16 && config.head_dim == 128 && config.causal &&
        config.draws_tiles()) {
      kernel_name = name;
      break;
    }
  }
  REQUIRE(!kernel_name.empty());
  INFO(kernel_name);
  const char* kernel = kernel_name.c_str();
  const int64_t B = 2, S = 1500, H = 16, D = 128;  // 2 x 16 x 12 = 384 tiles > SMs
  std::mt19937_64 rng(2024);
  const size_t n = static_cast<size_t>(B * S * H * D);
  std::vector<float> unused;
  DeviceBuffer q(n * 2), k(n * 2), v(n * 2);
  q.upload(random_16bit(n, true, rng, &unused).data(), n * 2);
  k.upload(random_16bit(n, true, rng, &unused).data(), n * 2);
  v.upload(random_16bit(n, true, rng, &unused).data(), n * 2);
  const Placement pl = contiguous(S, H, D);
  const fa3_tensor tq = describe_tensor(q.get(), pl, true, B, S, H, D);
  const fa3_tensor tk = describe_tensor(k.get(), pl, true, B, S, H, D);
  const fa3_tensor tv = describe_tensor(v.get(), pl, true, B, S, H, D);
  const fa3_params params{0.0f, 1, 0};
  Runner runner;

  DeviceBuffer reference(n * 2);
  reference.poison();
  fa3_tensor to = describe_tensor(reference.get(), pl, true, B, S, H, D);
  REQUIRE(fa3_forward_with_kernel(runner.handle(), kernel, &tq, &tk, &tv, &to, nullptr, &params,
                                  nullptr) == FA3_OK);
  cuda_check(cudaDeviceSynchronize(), "reference launch");
  std::vector<uint16_t> want(n);
  reference.download(want.data(), n * 2);
  size_t nan_bits = 0;
  for (uint16_t x : want) nan_bits += x == 0xffff;
  REQUIRE(nan_bits == 0);

  constexpr int kStreams = 3, kRounds = 4;
  cudaStream_t streams[kStreams];
  std::vector<DeviceBuffer> outs;
  for (int i = 0; i < kStreams; ++i) {
    cuda_check(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "stream");
    for (int r = 0; r < kRounds; ++r) {
      outs.emplace_back(n * 2);
      outs.back().poison();
    }
  }
  for (int r = 0; r < kRounds; ++r)
    for (int i = 0; i < kStreams; ++i) {
      fa3_tensor o = describe_tensor(outs[static_cast<size_t>(i * kRounds + r)].get(), pl, true, B,
                                     S, H, D);
      REQUIRE(fa3_forward_with_kernel(runner.handle(), kernel, &tq, &tk, &tv, &o, nullptr,
                                      &params, streams[i]) == FA3_OK);
    }
  cuda_check(cudaDeviceSynchronize(), "concurrent launches");
  std::vector<uint16_t> got(n);
  for (int i = 0; i < kStreams; ++i)
    for (int r = 0; r < kRounds; ++r) {
      outs[static_cast<size_t>(i * kRounds + r)].download(got.data(), n * 2);
      INFO("stream " << i << ", launch " << r);
      CHECK(got == want);
    }
  for (cudaStream_t st : streams) cudaStreamDestroy(st);
}

TEST_CASE("fa3_forward with Q and O over 2^31 elements", "[gpu][forward][large]") {
  // q and o of 2 x 8192 x 1032 x 128 = 2.16e9 elements: offsets past 2^31 in every
  // query-side index (the last (batch, head) pairs' tiles), GQA 8 over 129 K/V heads.
  // Sampled rows of every (batch, head) against float64; every element of O and the LSE
  // checked written, and the guards after them untouched. About 9 GB of GPU memory and 25 GB
  // of host memory. (K and V past 2^31: the next test.)
  Case c;
  c.bf16 = true; c.head_dim = 128; c.batch = 2; c.seqlen_q = 8192; c.seqlen_k = 2048;
  c.heads = 1032; c.heads_kv = 129;
  REQUIRE(static_cast<double>(c.batch * c.seqlen_q * c.heads * c.head_dim) > 2147483648.0);
  INFO(c.describe());
  Runner runner;
  check_outcome(runner.run(c, 525252));
}

TEST_CASE("fa3_forward with K and V over 2^31 elements", "[gpu][forward][large]") {
  // k and v of 1 x 2100001 x 8 x 128 = 2.15e9 elements each: key offsets past 2^31 in the
  // last key blocks of every head (a seqlen_k that is no multiple of a block), causal with
  // the mask bottom-right aligned, 300 queries (a tail). Every (batch, head)'s sampled rows
  // against float64 over all their keys; O and the LSE checked whole, guards untouched.
  // About 9 GB of GPU memory and 35 GB of host memory.
  Case c;
  c.bf16 = true; c.head_dim = 128; c.causal = true; c.batch = 1; c.seqlen_q = 300;
  c.seqlen_k = 2100001; c.heads = 8; c.heads_kv = 8;
  REQUIRE(static_cast<double>(c.batch * c.seqlen_k * c.heads_kv * c.head_dim) > 2147483648.0);
  INFO(c.describe());
  Runner runner;
  check_outcome(runner.run(c, 626262));
}

TEST_CASE("small forward cases for compute-sanitizer", "[gpu][forward][sanitize]") {
  // Few and small: under memcheck/racecheck/synccheck every kernel runs orders of magnitude
  // slower. Together they still cover each head dim, both dtypes, causal both ways, tails
  // in seqlen_q and seqlen_k, GQA, empty causal rows and a padded output; with the built-in
  // table they reach every loop of the production kernels: d128 cross-tile kernels with Q in
  // registers and three Q buffers (200 causal rows, 1600 causal rows, and non-causal 1700 x
  // 1000 with tiles from the counter), the Q warp storing O (bf16 non-causal 300 rows), d64
  // with three consumer warpgroups (1600 causal rows) and with half-width diagonal blocks (300
  // causal rows; 1000 with Q in registers), and d256's one-CTA-per-tile and persistent ones.
  Runner runner;
  Case cases[10];
  cases[0].bf16 = true; cases[0].head_dim = 128; cases[0].causal = true;
  cases[0].seqlen_q = 200; cases[0].seqlen_k = 131; cases[0].heads = 2; cases[0].heads_kv = 1;
  cases[1].bf16 = false; cases[1].head_dim = 64; cases[1].batch = 2; cases[1].seqlen_q = 65;
  cases[1].seqlen_k = 257; cases[1].heads = 2; cases[1].heads_kv = 2; cases[1].layout = Layout::PaddedOut;
  cases[2].bf16 = true; cases[2].head_dim = 256; cases[2].causal = true; cases[2].seqlen_q = 130;
  cases[2].seqlen_k = 130; cases[2].heads = 1; cases[2].heads_kv = 1;
  cases[3].bf16 = false; cases[3].head_dim = 256; cases[3].seqlen_q = 1; cases[3].seqlen_k = 70;
  cases[3].heads = 4; cases[3].heads_kv = 2;
  cases[4].bf16 = true; cases[4].head_dim = 128; cases[4].seqlen_q = 300; cases[4].seqlen_k = 190;
  cases[4].heads = 2; cases[4].heads_kv = 2;
  cases[5].bf16 = true; cases[5].head_dim = 128; cases[5].causal = true; cases[5].seqlen_q = 1600;
  cases[5].seqlen_k = 1600; cases[5].heads = 1; cases[5].heads_kv = 1;
  cases[6].bf16 = false; cases[6].head_dim = 64; cases[6].causal = true; cases[6].seqlen_q = 1600;
  cases[6].seqlen_k = 1650; cases[6].heads = 2; cases[6].heads_kv = 1;
  cases[7].bf16 = true; cases[7].head_dim = 64; cases[7].causal = true; cases[7].seqlen_q = 300;
  cases[7].seqlen_k = 333; cases[7].heads = 2; cases[7].heads_kv = 2;
  cases[8].bf16 = false; cases[8].head_dim = 128; cases[8].seqlen_q = 1700; cases[8].seqlen_k = 1000;
  cases[8].heads = 2; cases[8].heads_kv = 1;
  cases[9].bf16 = false; cases[9].head_dim = 64; cases[9].causal = true; cases[9].seqlen_q = 1000;
  cases[9].seqlen_k = 1000; cases[9].heads = 1; cases[9].heads_kv = 1;
  uint64_t seed = 6464;
  for (const Case& c : cases) {
    INFO(c.describe());
    check_outcome(runner.run(c, seed++));
  }
  // Calls that ask for no LSE: the table's _ls picks (d64, d128) run, not their twins.
  for (const int i : {4, 6, 7, 8}) {
    Case c = cases[i];
    c.with_lse = false;
    INFO(c.describe());
    check_outcome(runner.run(c, seed++));
  }
}
