// fa3_backward on the GPU against the float64 reference, with the FlashAttention error rule for
// each of dQ, dK and dV: max |ours - ref64| <= 2 * max |plain - ref64| + 1e-5, where "plain"
// is the backward computed in the input precision (support/reference.h). Each case runs
// fa3_forward (for O and the LSE) and then fa3_backward, on fresh random inputs, with the
// gradients poisoned with NaN first (every element must be written) and, in causal cases, the
// dO rows of query rows that see no key scaled up 64x (their dQ must be exactly 0 and they must
// add nothing to dK and dV). Odd sizes, GQA, packed and (B, H, S, D) views, deterministic mode,
// the handle's workspace and the caller's, streams at once, and a problem over 2^31 elements.
//
// First, the float64 backward reference itself, on the CPU: against central finite
// differences of the float64 forward (a wrong formula fails these).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fa3/fa3.h"
#include "gpu_env.h"
#include "runtime/backward_launch.h"
#include "runtime/backward_problem.h"
#include "runtime/handle.h"
#include "runtime/kernel_registry.h"
#include "support/half.h"
#include "support/reference.h"

using namespace fa3test;

namespace {

// ---- random inputs ---------------------------------------------------------------------------

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Normal(0, 1) values rounded to the 16-bit type from a counter-based generator, on all
// threads: billions of them take seconds, and element i is the same whatever the thread count.
void random_inputs(size_t n, bool bf16, uint64_t seed, std::vector<uint16_t>* bits,
                   std::vector<float>* values) {
  bits->resize(n);
  values->resize(n);
  constexpr size_t kChunk = size_t{1} << 18;
  const uint64_t key = splitmix64(seed);
  parallel_for(static_cast<int64_t>((n + kChunk - 1) / kChunk), [&](int64_t chunk) {
    const size_t end = std::min(n, static_cast<size_t>(chunk + 1) * kChunk);
    for (size_t i = static_cast<size_t>(chunk) * kChunk; i < end; ++i) {
      const uint64_t a = splitmix64(key ^ (2 * i)), b = splitmix64(key ^ (2 * i + 1));
      const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1p-53;  // (0, 1]
      const double u2 = static_cast<double>(b >> 11) * 0x1p-53;
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      (*bits)[i] = to_16bit(static_cast<float>(z), bf16);
      (*values)[i] = from_16bit((*bits)[i], bf16);
    }
  });
}

// ---- layouts ---------------------------------------------------------------------------------

enum class Layout {
  Contiguous,  // every tensor (B, S, H, D) in a buffer of its own
  // q, k, v: views of one (B, S, H + 2 Hkv, D) buffer; dq, dk, dv: of another (needs
  // seqlen_q == seqlen_k); o and dout contiguous.
  Packed,
  HeadsMajor,  // every tensor stored (B, H, S, D) and viewed as (B, S, H, D)
  // q, k, v, o, dout contiguous; dq, dk, dv with rows padded by 2 elements and 4 bytes into
  // their buffers: not TMA-aligned, so the kernels' dK/dV epilogue takes its 4-byte stores.
  // The backward reads a copy of the forward's O laid out the same way (o is no TMA tensor
  // of the backward: the preprocess reads it in 4-byte pairs where it is not 16-byte aligned).
  PaddedOutputs,
};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Packed: return "packed";
    case Layout::HeadsMajor: return "heads-major";
    case Layout::PaddedOutputs: return "padded outputs";
  }
  return "?";
}

// Where one logical (B, S, H, D) tensor lives: its buffer and its offset and strides there.
struct Placement {
  int buffer = 0;
  int64_t offset = 0;
  int64_t stride_batch = 0, stride_seq = 0, stride_head = 0;
  size_t index(int64_t b, int64_t s, int64_t h) const {
    return static_cast<size_t>(offset + b * stride_batch + s * stride_seq + h * stride_head);
  }
};

enum Tensor { kQ, kK, kV, kO, kDout, kDq, kDk, kDv, kTensors };
const char* const kTensorNames[kTensors] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};

struct Case {
  bool bf16 = true;
  int head_dim = 128;
  bool causal = false;
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads = 1, heads_kv = 1;
  Layout layout = Layout::Contiguous;
  float scale = 0;  // 0: default
  bool deterministic = false;

  bool q_like(int t) const { return t == kQ || t == kO || t == kDout || t == kDq; }
  int64_t seqlen(int t) const { return q_like(t) ? seqlen_q : seqlen_k; }
  int64_t heads_of(int t) const { return q_like(t) ? heads : heads_kv; }
  int64_t elements(int t) const { return batch * seqlen(t) * heads_of(t) * head_dim; }

  std::string describe() const {
    std::ostringstream s;
    s << (bf16 ? "bf16" : "f16") << " d" << head_dim << (causal ? " causal" : "") << " B=" << batch
      << " Sq=" << seqlen_q << " Sk=" << seqlen_k << " H=" << heads << " Hkv=" << heads_kv << " "
      << layout_name(layout) << (scale != 0 ? " scale=" + std::to_string(scale) : "")
      << (deterministic ? " deterministic" : "");
    return s.str();
  }
  AttentionShape shape() const {
    AttentionShape s;
    s.batch = batch; s.seqlen_q = seqlen_q; s.seqlen_k = seqlen_k; s.heads = heads;
    s.heads_kv = heads_kv; s.head_dim = head_dim; s.causal = causal; s.scale = scale;
    return s;
  }
  // The runtime's view of the case (its split plan, workspace), the scale left out.
  fa3::BackwardProblem problem() const {
    fa3::BackwardProblem p;
    p.dtype = bf16 ? fa3::DType::BF16 : fa3::DType::F16;
    p.head_dim = head_dim; p.causal = causal; p.deterministic = deterministic;
    p.batch = batch; p.seqlen_q = seqlen_q; p.seqlen_k = seqlen_k; p.heads = heads;
    p.heads_kv = heads_kv;
    return p;
  }
};

struct Plan {
  std::array<Placement, kTensors> at;
  std::vector<size_t> buffer_elements;
  bool own_buffer[kTensors] = {};  // alone and contiguous in its buffer: uploaded as it is
};

Plan plan_of(const Case& c) {
  const int64_t B = c.batch, D = c.head_dim;
  Plan p;
  if (c.layout == Layout::Packed) {
    const int64_t row = (c.heads + 2 * c.heads_kv) * D, S = c.seqlen_q;
    const Placement packed{0, 0, S * row, row, D};
    for (const int first : {int{kQ}, int{kDq}}) {
      const int buffer = static_cast<int>(p.buffer_elements.size());
      p.buffer_elements.push_back(static_cast<size_t>(B * S * row));
      for (int i = 0; i < 3; ++i) {
        Placement x = packed;
        x.buffer = buffer;
        x.offset = i == 0 ? 0 : (i == 1 ? c.heads * D : (c.heads + c.heads_kv) * D);
        p.at[static_cast<size_t>(first + i)] = x;
      }
    }
    for (const int t : {int{kO}, int{kDout}}) {
      const int64_t H = c.heads_of(t);
      p.at[static_cast<size_t>(t)] = {static_cast<int>(p.buffer_elements.size()), 0, S * H * D, H * D, D};
      p.buffer_elements.push_back(static_cast<size_t>(c.elements(t)));
      p.own_buffer[t] = true;
    }
    return p;
  }
  for (int t = 0; t < kTensors; ++t) {
    const int64_t S = c.seqlen(t), H = c.heads_of(t);
    const int buffer = static_cast<int>(p.buffer_elements.size());
    if (c.layout == Layout::PaddedOutputs && (t == kDq || t == kDk || t == kDv)) {
      const int64_t row = H * (D + 2);
      p.at[static_cast<size_t>(t)] = Placement{buffer, 2, S * row, row, D + 2};
      p.buffer_elements.push_back(static_cast<size_t>(2 + B * S * row));
      continue;
    }
    p.at[static_cast<size_t>(t)] = c.layout == Layout::HeadsMajor
                                       ? Placement{buffer, 0, H * S * D, D, S * D}
                                       : Placement{buffer, 0, S * H * D, H * D, D};
    p.own_buffer[t] = c.layout == Layout::Contiguous;
    p.buffer_elements.push_back(static_cast<size_t>(c.elements(t)));
  }
  return p;
}

fa3_tensor describe_tensor(void* base, const Placement& p, const Case& c, int t) {
  fa3_tensor x{};
  x.data = static_cast<uint16_t*>(base) + p.offset;
  x.dtype = c.bf16 ? FA3_BF16 : FA3_F16;
  x.batch = c.batch; x.seqlen = c.seqlen(t); x.heads = c.heads_of(t); x.head_dim = c.head_dim;
  x.stride_batch = p.stride_batch; x.stride_seq = p.stride_seq; x.stride_head = p.stride_head;
  return x;
}

// ---- one run ---------------------------------------------------------------------------------

struct Errors {
  double ours = 0, plain = 0;  // max |x - ref64|
};

double worse(double current, double candidate) {
  if (std::isnan(candidate)) return INFINITY;
  return std::max(current, candidate);
}

void merge(Errors* into, const Errors& e) {
  into->ours = worse(into->ours, e.ours);
  into->plain = worse(into->plain, e.plain);
}

struct Outcome {
  std::string error;  // a failed call or CUDA error; empty when the run completed
  Errors dq, dk, dv;
  size_t unwritten = 0;       // NaN elements of dq, dk, dv
  size_t empty_row_nonzero = 0;  // dq elements of rows that see no key that are not 0
  // Elements of the gradients' buffers that are no element of dq, dk or dv (padding, the guard
  // past each buffer's end) and lost their poison.
  size_t stray_writes = 0;
  // Bytes of the inputs (q, k, v, o, dout as the backward reads them, lse) changed by the
  // backward: compared with their images after the forward, up to kInputCheckBytes in all.
  size_t inputs_changed = 0;
  bool inputs_checked = false;
  size_t rows_checked = 0, key_rows_checked = 0;
  std::vector<std::vector<uint16_t>> gradients;  // the dq, dk, dv buffers (determinism checks)
};

enum class Workspace { Handle, Caller };

// Negative controls: what the host copy of the gradients is changed by before the checks, so
// that a test can see each check fail.
enum class Tamper {
  None,
  Gradients,  // dq, dk and dv each have 1.0 added to their element (0, 0, 0, 0)
  Unwritten,  // dk's element (0, 0, 0, 0) is NaN again
  EmptyRow,   // dq's element (0, 0, 0, 0) is 1.0 (causal cases with seqlen_q > seqlen_k)
  Stray,      // the last guard element of dv's buffer is 0, and (padded outputs) the first
              // padding element after dv's row (0, 0, 0)
  Input,      // the first element of q's buffer, as read back after the backward, changed
};

struct RunOptions {
  Workspace workspace = Workspace::Handle;
  bool check_reference = true;
  std::string kernel;  // run this backward kernel (fa3_backward_with_kernel), not the table's pick
  Tamper tamper = Tamper::None;
};

// Elements past the end of every buffer, poisoned with the gradients' buffers: a write past
// the end of dq, dk or dv shows there.
constexpr size_t kGuardElements = 256;
constexpr uint16_t kPoison = 0xffff;  // DeviceBuffer::poison's bytes: NaN in f16 and bf16
// The inputs are read back after the backward when they hold at most this many bytes (not in
// the [large] cases, whose inputs take several GB).
constexpr size_t kInputCheckBytes = size_t{1} << 30;

// The rows the reference computes. Everything when that is cheap; else, for the first and the
// last (batch, K/V head) group, the statistics of every query row (which dK and dV need) and a
// sample of key rows and query rows, plus query rows of a sample of other (batch, head) pairs.
struct RowPlan {
  bool everything = false;
  std::vector<std::array<int64_t, 2>> groups;  // (b, hk) checked in full
};

RowPlan row_plan(const Case& c) {
  RowPlan r;
  const double cost = static_cast<double>(c.batch) * c.heads * c.seqlen_q * c.seqlen_k * c.head_dim;
  r.everything = cost <= 3e9;
  if (r.everything) {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t hk = 0; hk < c.heads_kv; ++hk) r.groups.push_back({b, hk});
  } else {
    r.groups.push_back({0, 0});
    if (c.batch > 1 || c.heads_kv > 1) r.groups.push_back({c.batch - 1, c.heads_kv - 1});
  }
  return r;
}

std::vector<int64_t> sample_rows(int64_t n, std::mt19937_64& rng, int random_count) {
  std::set<int64_t> rows;
  for (int64_t i : {int64_t{0}, int64_t{1}, n / 2, n - 2, n - 1})
    if (i >= 0 && i < n) rows.insert(i);
  for (int k = 0; k < random_count; ++k) rows.insert(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)));
  return {rows.begin(), rows.end()};
}

class Runner {
 public:
  Runner() {
    const fa3_status s = fa3_create(&handle_, test_device(), nullptr);
    INFO(fa3_last_error());
    REQUIRE(s == FA3_OK);
  }
  ~Runner() { fa3_destroy(handle_); }
  fa3_handle* handle() const { return handle_; }

  // Runs one case; no Catch assertions inside.
  Outcome run(const Case& c, uint64_t seed, const RunOptions& options = {}) {
    Outcome r;
    if (c.layout == Layout::Packed && c.seqlen_q != c.seqlen_k) {
      r.error = "a packed layout needs seqlen_q == seqlen_k";
      return r;
    }
    const int64_t D = c.head_dim;
    const AttentionShape shape = c.shape();
    std::vector<uint16_t> bits[kTensors];
    std::vector<float> values[kTensors];
    for (const int t : {int{kQ}, int{kK}, int{kV}, int{kDout}})
      random_inputs(static_cast<size_t>(c.elements(t)), c.bf16, seed * 8 + static_cast<uint64_t>(t),
                    &bits[t], &values[t]);
    // dO of rows that see no key, 64x louder: a leak into dK, dV or their dQ stands out.
    if (c.causal)
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t i = 0; i < c.seqlen_q && shape.last_key(i) <= 0; ++i)
          for (int64_t h = 0; h < c.heads; ++h)
            for (int64_t x = 0; x < D; ++x) {
              const size_t at = static_cast<size_t>(((b * c.seqlen_q + i) * c.heads + h) * D + x);
              values[kDout][at] *= 64.0f;  // a power of two: exact
              bits[kDout][at] = to_16bit(values[kDout][at], c.bf16);
            }

    const Plan plan = plan_of(c);
    std::vector<DeviceBuffer> buffers;
    for (size_t n : plan.buffer_elements) buffers.emplace_back((n + kGuardElements) * 2);
    {
      std::vector<std::vector<uint16_t>> images(plan.buffer_elements.size());
      for (const int t : {int{kQ}, int{kK}, int{kV}, int{kDout}}) {
        const Placement& p = plan.at[static_cast<size_t>(t)];
        if (plan.own_buffer[t]) {
          buffers[static_cast<size_t>(p.buffer)].upload(bits[t].data(), bits[t].size() * 2);
          continue;
        }
        std::vector<uint16_t>& image = images[static_cast<size_t>(p.buffer)];
        image.resize(plan.buffer_elements[static_cast<size_t>(p.buffer)], 0);
        for (int64_t b = 0; b < c.batch; ++b)
          for (int64_t s = 0; s < c.seqlen(t); ++s)
            for (int64_t h = 0; h < c.heads_of(t); ++h)
              std::memcpy(&image[p.index(b, s, h)],
                          &bits[t][static_cast<size_t>(((b * c.seqlen(t) + s) * c.heads_of(t) + h) * D)],
                          static_cast<size_t>(D) * 2);
      }
      for (size_t i = 0; i < images.size(); ++i)
        if (!images[i].empty()) buffers[i].upload(images[i].data(), images[i].size() * 2);
      for (std::vector<uint16_t>& b : bits) std::vector<uint16_t>().swap(b);
    }
    for (const int t : {int{kO}, int{kDq}, int{kDk}, int{kDv}})
      buffers[static_cast<size_t>(plan.at[static_cast<size_t>(t)].buffer)].poison();
    DeviceBuffer lse(static_cast<size_t>(c.batch * c.heads * c.seqlen_q) * 4);
    lse.poison();

    fa3_tensor x[kTensors];
    for (int t = 0; t < kTensors; ++t) {
      const Placement& p = plan.at[static_cast<size_t>(t)];
      x[t] = describe_tensor(buffers[static_cast<size_t>(p.buffer)].get(), p, c, t);
    }
    const fa3_params params{c.scale, c.causal ? 1 : 0, c.deterministic ? 1 : 0};
    fa3_status s = fa3_forward(handle_, &x[kQ], &x[kK], &x[kV], &x[kO], lse.as<float>(), &params, nullptr);
    if (s != FA3_OK) {
      r.error = std::string("fa3_forward: ") + fa3_status_string(s) + ": " + fa3_last_error();
      return r;
    }
    DeviceBuffer padded_o;
    if (c.layout == Layout::PaddedOutputs) {
      // Rows of D elements, (b, s, h) major, into rows of D + 2 starting 2 elements (4 bytes)
      // into the buffer; the contiguous O is poisoned afterwards, so that a read of it shows.
      const int64_t rows = c.batch * c.seqlen_q * c.heads;
      padded_o = DeviceBuffer(static_cast<size_t>(2 + rows * (D + 2)) * 2);
      padded_o.poison();
      uint16_t* dst = static_cast<uint16_t*>(padded_o.get()) + 2;
      cuda_check(cudaMemcpy2D(dst, static_cast<size_t>(D + 2) * 2, x[kO].data,
                              static_cast<size_t>(D) * 2, static_cast<size_t>(D) * 2,
                              static_cast<size_t>(rows), cudaMemcpyDeviceToDevice),
                 "copying O into a padded layout");
      buffers[static_cast<size_t>(plan.at[kO].buffer)].poison();
      x[kO].data = dst;
      x[kO].stride_head = D + 2;
      x[kO].stride_seq = c.heads * (D + 2);
      x[kO].stride_batch = c.seqlen_q * c.heads * (D + 2);
    }
    // The backward's inputs as the forward left them: every buffer but the gradients' (the
    // padded layout's copy of O too), and lse.
    std::set<int> gradient_buffers;
    for (const int t : {int{kDq}, int{kDk}, int{kDv}}) gradient_buffers.insert(plan.at[static_cast<size_t>(t)].buffer);
    std::vector<const DeviceBuffer*> inputs{&lse};
    if (c.layout == Layout::PaddedOutputs) inputs.push_back(&padded_o);
    for (size_t i = 0; i < buffers.size(); ++i)
      if (!gradient_buffers.count(static_cast<int>(i))) inputs.push_back(&buffers[i]);
    size_t input_bytes = 0;
    for (const DeviceBuffer* b : inputs) input_bytes += b->bytes();
    r.inputs_checked = input_bytes <= kInputCheckBytes;
    std::vector<std::vector<uint8_t>> input_images;
    if (r.inputs_checked)
      for (const DeviceBuffer* b : inputs) {
        input_images.emplace_back(b->bytes());
        b->download(input_images.back().data(), b->bytes());
      }

    DeviceBuffer workspace;
    size_t workspace_bytes = 0;
    if (options.workspace == Workspace::Caller) {
      s = fa3_backward_workspace_size(handle_, &x[kQ], &x[kK], &params, &workspace_bytes);
      if (s != FA3_OK) {
        r.error = std::string("fa3_backward_workspace_size: ") + fa3_status_string(s) + ": " + fa3_last_error();
        return r;
      }
      workspace = DeviceBuffer(workspace_bytes);
      workspace.poison();  // the kernels must initialize what they use
    }
    if (options.kernel.empty())
      s = fa3_backward(handle_, &x[kQ], &x[kK], &x[kV], &x[kO], &x[kDout], lse.as<float>(), &x[kDq],
                       &x[kDk], &x[kDv], &params, workspace.get(), workspace_bytes, nullptr);
    else
      s = fa3_backward_with_kernel(handle_, options.kernel.c_str(), &x[kQ], &x[kK], &x[kV], &x[kO],
                                   &x[kDout], lse.as<float>(), &x[kDq], &x[kDk], &x[kDv], &params,
                                   workspace.get(), workspace_bytes, nullptr);
    if (s != FA3_OK) {
      r.error = std::string("fa3_backward: ") + fa3_status_string(s) + ": " + fa3_last_error();
      return r;
    }
    cuda_check(cudaDeviceSynchronize(), "fa3_forward + fa3_backward");

    for (size_t i = 0; i < input_images.size(); ++i) {
      std::vector<uint8_t> after(input_images[i].size());
      inputs[i]->download(after.data(), after.size());
      if (options.tamper == Tamper::Input && inputs[i] == &buffers[static_cast<size_t>(plan.at[kQ].buffer)])
        after[0] ^= 1;
      for (size_t at = 0; at < after.size(); ++at) r.inputs_changed += after[at] != input_images[i][at];
    }
    std::vector<std::vector<uint16_t>> host(buffers.size());
    for (const int i : gradient_buffers) {
      host[static_cast<size_t>(i)].resize(plan.buffer_elements[static_cast<size_t>(i)] + kGuardElements);
      buffers[static_cast<size_t>(i)].download(host[static_cast<size_t>(i)].data(), host[static_cast<size_t>(i)].size() * 2);
    }
    auto bits_at = [&](int t, int64_t b, int64_t s2, int64_t h, int64_t col) -> uint16_t& {
      const Placement& p = plan.at[static_cast<size_t>(t)];
      return host[static_cast<size_t>(p.buffer)][p.index(b, s2, h) + static_cast<size_t>(col)];
    };
    auto element = [&](int t, int64_t b, int64_t s2, int64_t h, int64_t col) {
      return from_16bit(bits_at(t, b, s2, h, col), c.bf16);
    };
    switch (options.tamper) {
      case Tamper::None:
      case Tamper::Input: break;
      case Tamper::Gradients:
        for (const int t : {int{kDq}, int{kDk}, int{kDv}})
          bits_at(t, 0, 0, 0, 0) = to_16bit(element(t, 0, 0, 0, 0) + 1.0f, c.bf16);
        break;
      case Tamper::Unwritten: bits_at(kDk, 0, 0, 0, 0) = kPoison; break;
      case Tamper::EmptyRow: bits_at(kDq, 0, 0, 0, 0) = to_16bit(1.0f, c.bf16); break;
      case Tamper::Stray:
        host[static_cast<size_t>(plan.at[kDv].buffer)].back() = 0;
        if (c.layout == Layout::PaddedOutputs) bits_at(kDv, 0, 0, 0, D) = 0;  // row 0's padding
        break;
    }

    // Nothing written outside dq, dk and dv: every other element of their buffers (the padded
    // layout's padding, the guard) still poisoned.
    for (const int i : gradient_buffers) {
      const std::vector<uint16_t>& image = host[static_cast<size_t>(i)];
      const size_t logical = plan.buffer_elements[static_cast<size_t>(i)];
      for (size_t at = logical; at < image.size(); ++at) r.stray_writes += image[at] != kPoison;
      // Only the padded layout leaves elements between a tensor's rows; the others fill their
      // buffers.
      if (c.layout != Layout::PaddedOutputs) continue;
      std::vector<uint8_t> inside(logical, 0);
      for (const int t : {int{kDq}, int{kDk}, int{kDv}}) {
        const Placement& p = plan.at[static_cast<size_t>(t)];
        if (p.buffer != i) continue;
        for (int64_t b = 0; b < c.batch; ++b)
          for (int64_t s2 = 0; s2 < c.seqlen(t); ++s2)
            for (int64_t h = 0; h < c.heads_of(t); ++h)
              std::memset(&inside[p.index(b, s2, h)], 1, static_cast<size_t>(D));
      }
      for (size_t at = 0; at < logical; ++at) r.stray_writes += !inside[at] && image[at] != kPoison;
    }

    // Every element written; rows that see no key: dQ exactly 0.
    for (const int t : {int{kDq}, int{kDk}, int{kDv}}) {
      std::atomic<size_t> nan_count{0}, nonzero{0};
      parallel_for(c.batch * c.seqlen(t), [&](int64_t row) {
        const int64_t b = row / c.seqlen(t), s2 = row % c.seqlen(t);
        const bool empty = t == kDq && shape.last_key(s2) <= 0;
        size_t n = 0, z = 0;
        for (int64_t h = 0; h < c.heads_of(t); ++h)
          for (int64_t col = 0; col < D; ++col) {
            const float v = element(t, b, s2, h, col);
            n += std::isnan(v);
            z += empty && v != 0.0f;
          }
        nan_count += n;
        nonzero += z;
      });
      r.unwritten += nan_count;
      r.empty_row_nonzero += nonzero;
    }

    if (options.check_reference) check_against_reference(c, values, element, &r);
    for (const int i : gradient_buffers) r.gradients.push_back(std::move(host[static_cast<size_t>(i)]));
    return r;
  }

 private:
  template <class Element>
  void check_against_reference(const Case& c, const std::vector<float>* values, Element element,
                               Outcome* r) {
    const AttentionShape shape = c.shape();
    const int64_t D = c.head_dim, g = c.heads / c.heads_kv;
    const float *q = values[kQ].data(), *k = values[kK].data(), *v = values[kV].data(),
                *dout = values[kDout].data();
    const RowPlan plan = row_plan(c);
    std::mt19937_64 rng(12345);
    struct Row {
      int64_t b, h, i;  // for a key row: h is the K/V head, i the key
    };
    auto compare_dq = [&](const Row& row, const BackwardRowStats& st, const PlainRowStats& pst,
                          Errors* e) {
      std::vector<double> ref(static_cast<size_t>(D));
      std::vector<float> plain(static_cast<size_t>(D));
      reference_dq_row(shape, q, k, v, dout, row.b, row.h, row.i, st, ref.data());
      plain_dq_row(shape, q, k, v, dout, row.b, row.h, row.i, pst, c.bf16, plain.data());
      for (int64_t x = 0; x < D; ++x) {
        e->ours = worse(e->ours, std::fabs(element(kDq, row.b, row.i, row.h, x) - ref[static_cast<size_t>(x)]));
        e->plain = worse(e->plain, std::fabs(plain[static_cast<size_t>(x)] - ref[static_cast<size_t>(x)]));
      }
    };
    for (const auto& group : plan.groups) {
      const int64_t b = group[0], hk = group[1];
      const std::vector<BackwardRowStats> stats = reference_group_stats(shape, q, k, v, dout, b, hk);
      const std::vector<PlainRowStats> plain_stats = plain_group_stats(shape, q, k, v, dout, b, hk, c.bf16);
      std::vector<Row> rows;
      for (int64_t hh = 0; hh < g; ++hh) {
        const std::vector<int64_t> is = plan.everything ? std::vector<int64_t>() : sample_rows(c.seqlen_q, rng, 24);
        if (plan.everything)
          for (int64_t i = 0; i < c.seqlen_q; ++i) rows.push_back({b, hk * g + hh, i});
        for (int64_t i : is) rows.push_back({b, hk * g + hh, i});
      }
      std::vector<Errors> dq_errors(rows.size());
      parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t idx) {
        const Row& row = rows[static_cast<size_t>(idx)];
        const size_t at = static_cast<size_t>((row.h - hk * g) * c.seqlen_q + row.i);
        compare_dq(row, stats[at], plain_stats[at], &dq_errors[static_cast<size_t>(idx)]);
      });
      for (const Errors& e : dq_errors) merge(&r->dq, e);
      r->rows_checked += rows.size();

      std::vector<int64_t> keys;
      if (plan.everything)
        for (int64_t j = 0; j < c.seqlen_k; ++j) keys.push_back(j);
      else
        keys = sample_rows(c.seqlen_k, rng, 40);
      std::vector<Errors> dk_errors(keys.size()), dv_errors(keys.size());
      parallel_for(static_cast<int64_t>(keys.size()), [&](int64_t idx) {
        const int64_t j = keys[static_cast<size_t>(idx)];
        std::vector<double> ref_k(static_cast<size_t>(D)), ref_v(static_cast<size_t>(D));
        std::vector<float> plain_k(static_cast<size_t>(D)), plain_v(static_cast<size_t>(D));
        reference_dkv_row(shape, q, k, v, dout, b, hk, j, stats.data(), ref_k.data(), ref_v.data());
        plain_dkv_row(shape, q, k, v, dout, b, hk, j, plain_stats.data(), c.bf16, plain_k.data(), plain_v.data());
        Errors& ek = dk_errors[static_cast<size_t>(idx)];
        Errors& ev = dv_errors[static_cast<size_t>(idx)];
        for (int64_t x = 0; x < D; ++x) {
          const size_t xs = static_cast<size_t>(x);
          ek.ours = worse(ek.ours, std::fabs(element(kDk, b, j, hk, x) - ref_k[xs]));
          ek.plain = worse(ek.plain, std::fabs(plain_k[xs] - ref_k[xs]));
          ev.ours = worse(ev.ours, std::fabs(element(kDv, b, j, hk, x) - ref_v[xs]));
          ev.plain = worse(ev.plain, std::fabs(plain_v[xs] - ref_v[xs]));
        }
      });
      for (size_t i = 0; i < keys.size(); ++i) {
        merge(&r->dk, dk_errors[i]);
        merge(&r->dv, dv_errors[i]);
      }
      r->key_rows_checked += keys.size();
    }
    if (plan.everything) return;
    // Query rows of other (batch, head) pairs, each with its own statistics.
    std::vector<Row> rows;
    for (int n = 0; n < 64; ++n) {
      const int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.batch));
      const int64_t h = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.heads));
      for (int64_t i : sample_rows(c.seqlen_q, rng, 3)) rows.push_back({b, h, i});
    }
    std::vector<Errors> errors(rows.size());
    parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t idx) {
      const Row& row = rows[static_cast<size_t>(idx)];
      compare_dq(row, reference_row_stats(shape, q, k, v, dout, row.b, row.h, row.i),
                 plain_row_stats(shape, q, k, v, dout, row.b, row.h, row.i, c.bf16),
                 &errors[static_cast<size_t>(idx)]);
    });
    for (const Errors& e : errors) merge(&r->dq, e);
    r->rows_checked += rows.size();
  }

  fa3_handle* handle_ = nullptr;
};

// The FlashAttention rule; a plain error that is not finite (NaN maps to infinity in worse())
// bounds nothing.
bool within_rule(const Errors& e) {
  return std::isfinite(e.plain) && e.ours <= 2 * e.plain + 1e-5;
}

void check_outcome(const Outcome& r, bool reference_checked = true) {
  INFO(r.error);
  REQUIRE(r.error.empty());
  CAPTURE(r.dq.ours, r.dq.plain, r.dk.ours, r.dk.plain, r.dv.ours, r.dv.plain, r.rows_checked,
          r.key_rows_checked);
  CHECK(r.unwritten == 0);
  CHECK(r.empty_row_nonzero == 0);
  CHECK(r.stray_writes == 0);
  CHECK(r.inputs_changed == 0);
  if (!reference_checked) return;
  CHECK(r.rows_checked > 0);
  CHECK(r.key_rows_checked > 0);
  CHECK(within_rule(r.dq));
  CHECK(within_rule(r.dk));
  CHECK(within_rule(r.dv));
}

struct Shape {
  int64_t batch, seqlen_q, seqlen_k, heads, heads_kv;
  Layout layout;
};

// The shapes every (dtype, head_dim, causal) combination runs.
const Shape kShapes[] = {
    {1, 1, 1, 2, 2, Layout::Contiguous},       // seqlen 1
    {2, 17, 17, 4, 2, Layout::Contiguous},     // 17, GQA 2
    {1, 1000, 1000, 2, 2, Layout::Packed},     // 1000; q, k, v and dq, dk, dv packed views
    {2, 113, 1000, 8, 8, Layout::HeadsMajor},  // seqlen_q < seqlen_k; (B, H, S, D) views
    {2, 1000, 113, 8, 1, Layout::Contiguous},  // seqlen_q > seqlen_k (causal: rows see no key); GQA 8/1
    {1, 300, 517, 8, 2, Layout::Contiguous},   // GQA 8/2
    {1, 1, 1000, 8, 2, Layout::Contiguous},    // one query row
    {1, 1000, 1, 2, 1, Layout::Contiguous},    // one key (causal: all but the last row see none)
    {2, 257, 257, 8, 2, Layout::Packed},       // packed GQA 8/2: (B, S, 12, D)
    {2, 300, 200, 4, 2, Layout::PaddedOutputs},  // dq, dk, dv not TMA-aligned
};

Case case_of(const Shape& s, bool bf16, int head_dim, bool causal) {
  Case c;
  c.bf16 = bf16; c.head_dim = head_dim; c.causal = causal;
  c.batch = s.batch; c.seqlen_q = s.seqlen_q; c.seqlen_k = s.seqlen_k;
  c.heads = s.heads; c.heads_kv = s.heads_kv; c.layout = s.layout;
  return c;
}

// ---- the float64 reference on the CPU --------------------------------------------------------

// sum(O * dO) of the float64 forward (reference_row).
double loss(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
            const std::vector<float>& v, const std::vector<float>& dout) {
  double total = 0;
  std::vector<double> o(static_cast<size_t>(s.head_dim));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        double lse;
        reference_row(s, q.data(), k.data(), v.data(), b, h, i, o.data(), &lse);
        for (int64_t c = 0; c < s.head_dim; ++c)
          total += o[static_cast<size_t>(c)] *
                   dout[static_cast<size_t>(((b * s.seqlen_q + i) * s.heads + h) * s.head_dim + c)];
      }
  return total;
}

std::vector<float> bf16_normals(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = round_to_16bit(d(rng), true);
  return x;
}

}  // namespace

TEST_CASE("backward reference: float64 gradients equal finite differences of sum(O * dO)",
          "[cpu][reference]") {
  AttentionShape s;
  s.batch = 1; s.heads = 2; s.heads_kv = 1; s.head_dim = 8;
  s.seqlen_q = 5; s.seqlen_k = 7;
  s.causal = GENERATE(false, true);
  s.scale = GENERATE(0.0, 0.3);
  const bool more_queries = GENERATE(false, true);  // causal: rows 0 and 1 see no key
  if (more_queries) std::swap(s.seqlen_q, s.seqlen_k);
  INFO((s.causal ? "causal" : "not causal") << " scale " << s.scale << " Sq " << s.seqlen_q
                                            << " Sk " << s.seqlen_k);
  std::mt19937_64 rng(11);
  std::vector<float> q = bf16_normals(static_cast<size_t>(s.seqlen_q * s.heads * 8), rng);
  std::vector<float> k = bf16_normals(static_cast<size_t>(s.seqlen_k * s.heads_kv * 8), rng);
  std::vector<float> v = bf16_normals(k.size(), rng);
  std::vector<float> dout = bf16_normals(q.size(), rng);
  std::vector<double> dq, dk, dv;
  reference_backward(s, q.data(), k.data(), v.data(), dout.data(), &dq, &dk, &dv);

  // Central differences with steps 2^-8 and 2^-9, extrapolated (Richardson): error O(h^4),
  // within 1e-10 of the largest gradient here; a wrong term (D, the scale, a group's sum) is off
  // by far more than the 1e-9 allowed. Inputs have bf16 precision, so x +- h is exact in a float.
  auto numeric = [&](std::vector<float>* x, size_t i) {
    const float x0 = (*x)[i];
    auto diff = [&](float h) {
      (*x)[i] = x0 + h;
      REQUIRE((*x)[i] - h == x0);
      const double up = loss(s, q, k, v, dout);
      (*x)[i] = x0 - h;
      const double down = loss(s, q, k, v, dout);
      (*x)[i] = x0;
      return (up - down) / (2.0 * h);
    };
    const double d1 = diff(0x1p-8f), d2 = diff(0x1p-9f);
    return (4.0 * d2 - d1) / 3.0;
  };
  struct Gradient {
    const char* name;
    std::vector<float>* input;
    const std::vector<double>* analytic;
  };
  for (const Gradient& grad : {Gradient{"dq", &q, &dq}, Gradient{"dk", &k, &dk}, Gradient{"dv", &v, &dv}}) {
    double largest = 0;
    for (double x : *grad.analytic) largest = std::max(largest, std::fabs(x));
    REQUIRE(largest > 0.1);
    for (size_t i = 0; i < grad.input->size(); ++i) {
      INFO(grad.name << "[" << i << "]");
      CHECK(std::fabs(numeric(grad.input, i) - (*grad.analytic)[i]) <= 1e-9 * largest);
    }
  }
  // Rows that see no key: zero gradient (and, above, no contribution to dK and dV).
  for (int64_t i = 0; i < s.seqlen_q; ++i)
    if (s.last_key(i) <= 0)
      for (int64_t x = 0; x < 2 * 8; ++x) CHECK(dq[static_cast<size_t>(i * 16 + x)] == 0.0);
}

TEST_CASE("backward reference: the plain same-precision backward is close, not exact",
          "[cpu][reference]") {
  AttentionShape s;
  s.batch = 2; s.heads = 4; s.heads_kv = 2; s.head_dim = 64;
  s.seqlen_q = 33; s.seqlen_k = 20;
  s.causal = GENERATE(false, true);
  const bool bf16 = GENERATE(false, true);
  std::mt19937_64 rng(5);
  std::vector<float> q = bf16_normals(static_cast<size_t>(s.batch * s.seqlen_q * s.heads * 64), rng);
  std::vector<float> k = bf16_normals(static_cast<size_t>(s.batch * s.seqlen_k * s.heads_kv * 64), rng);
  std::vector<float> v = bf16_normals(k.size(), rng);
  std::vector<float> dout = bf16_normals(q.size(), rng);
  std::vector<double> dq, dk, dv;
  std::vector<float> pq, pk, pv;
  reference_backward(s, q.data(), k.data(), v.data(), dout.data(), &dq, &dk, &dv);
  plain_backward(s, q.data(), k.data(), v.data(), dout.data(), bf16, &pq, &pk, &pv);
  for (const auto& pair : {std::make_pair(&dq, &pq), std::make_pair(&dk, &pk), std::make_pair(&dv, &pv)}) {
    double largest = 0, err = 0;
    for (size_t i = 0; i < pair.first->size(); ++i) {
      largest = std::max(largest, std::fabs((*pair.first)[i]));
      err = std::max(err, std::fabs((*pair.first)[i] - (*pair.second)[i]));
      // Every plain value is a 16-bit value.
      CHECK(round_to_16bit((*pair.second)[i], bf16) == (*pair.second)[i]);
    }
    CHECK(err > 0);
    CHECK(err < (bf16 ? 0.05 : 0.01) * largest);
  }
  // Rows with no key: exactly 0 in both.
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.seqlen_q; ++i)
      if (s.last_key(i) <= 0)
        for (int64_t x = 0; x < s.heads * 64; ++x) {
          const size_t at = static_cast<size_t>((b * s.seqlen_q + i) * s.heads * 64 + x);
          CHECK(dq[at] == 0.0);
          CHECK(pq[at] == 0.0f);
        }
  // The row functions with one row's statistics give the whole problem's rows.
  std::vector<double> row(64);
  reference_dq_row(s, q.data(), k.data(), v.data(), dout.data(), 1, 3, 32,
                   reference_row_stats(s, q.data(), k.data(), v.data(), dout.data(), 1, 3, 32), row.data());
  for (int64_t x = 0; x < 64; ++x)
    CHECK(row[static_cast<size_t>(x)] == dq[static_cast<size_t>(((1 * 33 + 32) * 4 + 3) * 64 + x)]);
}

// ---- GPU -------------------------------------------------------------------------------------

TEST_CASE("fa3_backward matches the float64 reference", "[gpu][backward]") {
  Runner runner;
  const bool bf16 = GENERATE(false, true);
  const int head_dim = GENERATE(64, 128, 256);
  const bool causal = GENERATE(false, true);
  uint64_t seed = 2000 + static_cast<uint64_t>(head_dim) * 4 + (bf16 ? 2 : 0) + (causal ? 1 : 0);
  // Every other shape, and each with seqlen_q > seqlen_k (causal: query blocks that see no key,
  // whose dQ only the preprocess's zeroing writes), with a caller's workspace poisoned with NaN:
  // the handle's own may be fresh memory that happens to be zero.
  bool caller = false;
  for (const Shape& s : kShapes) {
    const Case c = case_of(s, bf16, head_dim, causal);
    RunOptions options;
    options.workspace = caller || s.seqlen_q > s.seqlen_k ? Workspace::Caller : Workspace::Handle;
    caller = !caller;
    INFO(c.describe() << (options.workspace == Workspace::Caller ? ", caller's workspace" : ""));
    check_outcome(runner.run(c, seed, options));
    seed += 7919;
  }
}

// Runs each compiled backward kernel that is (or is not) persistent by name on every shape,
// the seed advancing by 7919 a run; returns how many kernels ran.
template <size_t N>
int run_each_backward_kernel(Runner& runner, const Shape (&shapes)[N], bool persistent,
                             uint64_t seed) {
  int kernels = 0;
  for (int i = 0; i < fa3_kernel_count(); ++i) {
    const std::string name = fa3_kernel_name(i);
    const auto cfg = fa3::parse_bwd_kernel_name(name);
    if (!cfg || cfg->persistent != persistent) continue;
    ++kernels;
    for (const Shape& s : shapes) {
      const Case c = case_of(s, cfg->dtype == fa3::DType::BF16, cfg->head_dim, cfg->causal);
      INFO(name << ": " << c.describe());
      RunOptions named;
      named.kernel = name;
      check_outcome(runner.run(c, seed, named));
      seed += 7919;
    }
  }
  return kernels;
}

TEST_CASE("the persistent (_pt) kernels walk several tiles a CTA", "[gpu][backward]") {
  // More tiles (K/V blocks) than SMs, so that every CTA of each compiled _pt kernel (by name:
  // the table picks them for causal calls at head dims 64 and 128 at every length, and for
  // d128 non-causal calls from 1024) draws tiles from the counter
  // and the carried pipeline, dS^T and dQ-buffer phases cross tile boundaries; dK and dV leave
  // through shared memory (the dQ buffers; head dim 128 also dV's own or the dS^T stages), or
  // (padded outputs, not TMA-aligned) from registers.
  Runner runner;
  const Shape shapes[] = {
      {2, 4000, 4000, 16, 4, Layout::Contiguous},    // 2 x 4 pairs x 32 blocks: 256 tiles, GQA 4
      {1, 1500, 9000, 8, 8, Layout::HeadsMajor},     // 8 x 71: 568 tiles, seqlen_q < seqlen_k
      {2, 2100, 2100, 8, 8, Layout::PaddedOutputs},  // 16 x 17: 272 tiles, dK, dV by plain stores
  };
  CHECK(run_each_backward_kernel(runner, shapes, /*persistent=*/true, 4100) >= 2);
}

TEST_CASE("the one-tile kernels over several waves of CTAs",
          "[gpu][backward][sanitize]") {
  // More tiles than SMs for each compiled kernel that runs a CTA a tile: every such kernel over
  // several waves; GQA, seqlen_q != seqlen_k and padded outputs. Also a [sanitize] case (on an
  // H200 each sanitizer takes 40-60 s over it).
  // Short query blocks keep the float64 reference cheap; many K/V blocks make the tiles.
  Runner runner;
  const Shape shapes[] = {
      {2, 300, 2200, 8, 4, Layout::HeadsMajor},      // 2 x 4 pairs x 18 blocks of 128 keys, GQA 2
      {3, 1100, 1100, 6, 6, Layout::PaddedOutputs},  // 18 x 9, dK and dV by plain stores
  };
  CHECK(run_each_backward_kernel(runner, shapes, /*persistent=*/false, 5100) >= 2);
}

TEST_CASE("every compiled backward kernel, named, matches the float64 reference",
          "[gpu][backward]") {
  // The table picks a kernel by seqlen_q too (d128 non-causal: _dqh below 1024 query rows,
  // _dqt from there), so the shapes above miss some kernels: each runs them by name here.
  Runner runner;
  int kernels = 0;
  uint64_t seed = 9000;
  for (int i = 0; i < fa3_kernel_count(); ++i) {
    const std::string name = fa3_kernel_name(i);
    std::string why;
    const auto cfg = fa3::parse_bwd_kernel_name(name, &why);
    if (!cfg) continue;  // a forward kernel
    ++kernels;
    const bool bf16 = cfg->dtype == fa3::DType::BF16;
    for (const Shape& s : {kShapes[1], kShapes[2], kShapes[3], kShapes[4], kShapes[6]}) {
      const Case c = case_of(s, bf16, cfg->head_dim, cfg->causal);
      INFO(name << ": " << c.describe());
      RunOptions named;
      named.kernel = name;
      check_outcome(runner.run(c, seed++, named));
    }
  }
  CHECK(kernels >= 14);
}

// A contiguous case's eight tensors, each in a buffer of its own filled with fresh random values
// (the outputs too: a test poisons what it checks), and a buffer for the LSE.
struct RandomTensors {
  Case c;
  DeviceBuffer in[kTensors];
  fa3_tensor x[kTensors];
  DeviceBuffer lse;
  RandomTensors(const Case& c_, uint64_t seed) : c(c_) {
    const Plan plan = plan_of(c);
    for (int t = 0; t < kTensors; ++t) {
      in[t] = DeviceBuffer(static_cast<size_t>(c.elements(t)) * 2);
      x[t] = describe_tensor(in[t].get(), plan.at[static_cast<size_t>(t)], c, t);
      std::vector<uint16_t> bits;
      std::vector<float> values;
      random_inputs(static_cast<size_t>(c.elements(t)), c.bf16, seed + static_cast<uint64_t>(t),
                    &bits, &values);
      in[t].upload(bits.data(), bits.size() * 2);
    }
    lse = DeviceBuffer(static_cast<size_t>(c.batch * c.heads * c.seqlen_q) * 4);
  }
  // Tensor t's bits.
  std::vector<uint16_t> download(int t) {
    std::vector<uint16_t> bits(static_cast<size_t>(c.elements(t)));
    in[t].download(bits.data(), bits.size() * 2);
    return bits;
  }
  // O, dQ, dK and dV made NaN.
  void poison_outputs() {
    for (const int t : {int{kO}, int{kDq}, int{kDk}, int{kDv}}) in[t].poison();
  }
};

TEST_CASE("the checks fail on tampered gradients (negative controls)", "[gpu][backward]") {
  // Each check of check_outcome sees its defect: gradients off by 1.0, an element left NaN, a
  // row that sees no key with a non-zero dQ, writes into the padding or past a buffer's end.
  Runner runner;
  Case c;
  c.bf16 = true; c.head_dim = 128; c.seqlen_q = 300; c.seqlen_k = 200; c.heads = 4;
  c.heads_kv = 2; c.layout = Layout::PaddedOutputs;
  uint64_t seed = 77;
  for (const Layout layout : {Layout::PaddedOutputs, Layout::Contiguous}) {
    c.layout = layout;
    INFO(c.describe());
    const Outcome clean = runner.run(c, seed);
    check_outcome(clean);
    RunOptions tamper;
    tamper.tamper = Tamper::Gradients;
    const Outcome off = runner.run(c, seed, tamper);
    REQUIRE(off.error.empty());
    CHECK_FALSE(within_rule(off.dq));
    CHECK_FALSE(within_rule(off.dk));
    CHECK_FALSE(within_rule(off.dv));
    CHECK(off.unwritten == 0);
    tamper.tamper = Tamper::Unwritten;
    CHECK(runner.run(c, seed, tamper).unwritten == 1);
    tamper.tamper = Tamper::Stray;
    CHECK(runner.run(c, seed, tamper).stray_writes == (layout == Layout::PaddedOutputs ? 2u : 1u));
    tamper.tamper = Tamper::Input;
    const Outcome input = runner.run(c, seed, tamper);
    CHECK(input.inputs_checked);
    CHECK(input.inputs_changed == 1);
    ++seed;
  }
  // Causal with seqlen_q > seqlen_k: query row 0 sees no key.
  c.causal = true;
  RunOptions tamper;
  tamper.tamper = Tamper::EmptyRow;
  const Outcome empty = runner.run(c, seed, tamper);
  REQUIRE(empty.error.empty());
  CHECK(empty.empty_row_nonzero == 1);
}

TEST_CASE("fa3_backward refuses bad arguments on real memory and leaves every output as it was",
          "[gpu][backward]") {
  // The CPU tests check each rule's sentence with made-up addresses; here the outputs and the
  // workspace are real, poisoned, and read back after the stream has drained.
  const int64_t B = 2, S = 300, H = 4, Hkv = 2, D = 128;
  Case c;
  c.bf16 = true; c.head_dim = D; c.batch = B; c.seqlen_q = c.seqlen_k = S; c.heads = H;
  c.heads_kv = Hkv;
  Runner runner;
  RandomTensors tensors(c, 600);
  DeviceBuffer* in = tensors.in;
  fa3_tensor* x = tensors.x;
  DeviceBuffer& lse = tensors.lse;
  const fa3_params params{0.0f, 1, 0};
  REQUIRE(fa3_forward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], lse.as<float>(), &params,
                      nullptr) == FA3_OK);
  size_t needed = 0;
  REQUIRE(fa3_backward_workspace_size(runner.handle(), &x[kQ], &x[kK], &params, &needed) == FA3_OK);
  DeviceBuffer workspace(needed + 256);
  struct Bad {
    const char* what;
    void* workspace;
    size_t bytes;
    fa3_tensor dv;
    fa3_status status;
    std::string sentence;  // a part of fa3_last_error() (the CPU tests check each whole)
  };
  fa3_tensor dv_wrong_heads = x[kDv];
  dv_wrong_heads.heads = H;
  fa3_tensor dv_on_dk = x[kDv];
  dv_on_dk.data = x[kDk].data;
  const Bad bad[] = {
      {"workspace too small", workspace.get(), needed - 1, x[kDv], FA3_ERR_INVALID_ARGUMENT,
       "workspace_bytes (" + std::to_string(needed - 1) + ") is less than the " +
           std::to_string(needed) + " bytes this problem needs"},
      {"workspace misaligned", static_cast<char*>(workspace.get()) + 128, needed, x[kDv],
       FA3_ERR_INVALID_ARGUMENT, "must be 256-byte aligned"},
      {"dv with q's heads", workspace.get(), needed, dv_wrong_heads, FA3_ERR_INVALID_ARGUMENT,
       "dv->heads (4) must equal v->heads (2)"},
      {"dv on dk", nullptr, 0, dv_on_dk, FA3_ERR_INVALID_ARGUMENT, "dv overlaps dk in memory"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    for (const int t : {int{kDq}, int{kDk}, int{kDv}}) in[t].poison();
    workspace.poison();
    fa3_tensor dv = b.dv;
    CHECK(fa3_backward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], &x[kDout], lse.as<float>(),
                       &x[kDq], &x[kDk], &dv, &params, b.workspace, b.bytes, nullptr) == b.status);
    INFO(fa3_last_error());
    CHECK_THAT(std::string(fa3_last_error()), Catch::Contains(b.sentence));
    cuda_check(cudaDeviceSynchronize(), "after a refused call");
    for (const int t : {int{kDq}, int{kDk}, int{kDv}}) {
      std::vector<uint16_t> back(static_cast<size_t>(c.elements(t)));
      in[t].download(back.data(), back.size() * 2);
      CHECK(std::count(back.begin(), back.end(), kPoison) == static_cast<std::ptrdiff_t>(back.size()));
    }
    std::vector<uint16_t> scratch((needed + 256) / 2);
    workspace.download(scratch.data(), scratch.size() * 2);
    CHECK(std::count(scratch.begin(), scratch.end(), kPoison) == static_cast<std::ptrdiff_t>(scratch.size()));
  }
  // The same arguments, mended, run: the refusals were the arguments', not the setup's.
  for (const int t : {int{kDq}, int{kDk}, int{kDv}}) in[t].poison();
  REQUIRE(fa3_backward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], &x[kDout], lse.as<float>(),
                       &x[kDq], &x[kDk], &x[kDv], &params, workspace.get(), needed, nullptr) == FA3_OK);
  cuda_check(cudaDeviceSynchronize(), "the mended call");
  for (const int t : {int{kDq}, int{kDk}, int{kDv}}) {
    std::vector<uint16_t> back(static_cast<size_t>(c.elements(t)));
    in[t].download(back.data(), back.size() * 2);
    CHECK(std::count(back.begin(), back.end(), kPoison) == 0);
  }
}

// A causal bf16 forward kernel of head dim `d` that draws its tiles from the stream's
// counter, by name (one that sums its rows in fp32: the calls pass an lse); "" if none.
std::string tile_drawing_forward_kernel(int64_t d) {
  for (const fa3::KernelInfo& k : fa3::compiled_kernels())
    if (k.direction == fa3::Direction::Forward && k.fwd.draws_tiles() && k.fwd.causal &&
        k.fwd.head_dim == d && k.fwd.dtype == fa3::DType::BF16 && !k.fwd.row_sum_mma)
      return k.name;
  return "";
}

TEST_CASE("CUDA graphs: the backward without a workspace and a tile counter before the context "
          "has any are refused during capture; captured calls replay bit for bit",
          "[gpu][backward]") {
  const int64_t B = 2, S = 700, H = 4, Hkv = 2, D = 128;
  Case c;
  c.bf16 = true; c.head_dim = D; c.causal = true; c.batch = B; c.seqlen_q = c.seqlen_k = S;
  c.heads = H; c.heads_kv = Hkv; c.deterministic = true;
  Runner runner;
  RandomTensors tensors(c, 700);
  fa3_tensor* x = tensors.x;
  DeviceBuffer& lse = tensors.lse;
  const fa3_params params{0.0f, 1, 1};
  size_t needed = 0;
  REQUIRE(fa3_backward_workspace_size(runner.handle(), &x[kQ], &x[kK], &params, &needed) == FA3_OK);
  DeviceBuffer workspace(needed);
  auto download = [&](int t) { return tensors.download(t); };
  auto gradients = [&] {
    std::vector<std::vector<uint16_t>> g;
    for (const int t : {int{kDq}, int{kDk}, int{kDv}}) g.push_back(download(t));
    return g;
  };
  auto poison_outputs = [&] { tensors.poison_outputs(); };
  const std::string drawing = tile_drawing_forward_kernel(D);
  REQUIRE_FALSE(drawing.empty());
  INFO(drawing);
  // Each call's status and fa3_last_error().
  struct Call {
    fa3_status status;
    std::string error;
  };
  auto forward = [&](cudaStream_t stream) {
    const fa3_status st = fa3_forward_with_kernel(runner.handle(), drawing.c_str(), &x[kQ], &x[kK],
                                                  &x[kV], &x[kO], lse.as<float>(), &params, stream);
    return Call{st, fa3_last_error()};
  };
  auto backward = [&](void* w, size_t bytes, cudaStream_t stream) {
    const fa3_status st =
        fa3_backward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], &x[kDout], lse.as<float>(),
                     &x[kDq], &x[kDk], &x[kDv], &params, w, bytes, stream);
    return Call{st, fa3_last_error()};
  };
  auto expect = [](const Call& call, fa3_status status, const char* error_start) {
    INFO(call.error);
    CHECK(call.status == status);
    CHECK(call.error.find(error_start) == 0);
  };
  cudaStream_t stream;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");

  // The handle's first forward with a counter (a fresh handle: no counter in the context yet),
  // inside a capture: refused, and the capture is still valid (nothing unsafe was called).
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  expect(forward(stream), FA3_ERR_INVALID_ARGUMENT,
         "stream is capturing a CUDA graph and the handle has no tile counter to give it");
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  if (graph) cudaGraphDestroy(graph);

  // Direct calls on the stream: the expected bits (and the stream's counter).
  poison_outputs();
  expect(forward(stream), FA3_OK, "");
  expect(backward(workspace.get(), needed, stream), FA3_OK, "");
  cuda_check(cudaStreamSynchronize(stream), "direct calls");
  const std::vector<uint16_t> want_o = download(kO);
  const std::vector<std::vector<uint16_t>> want = gradients();

  // Captured on that stream (its counter found by the handle) and on one first used in the
  // capture (a spare counter): the forward, the backward refused without a workspace, then
  // with the caller's; each graph replayed.
  cudaStream_t fresh;
  cuda_check(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking), "stream");
  for (cudaStream_t s : {stream, fresh}) {
    const bool direct = s == stream;
    INFO((direct ? "the stream of the direct calls" : "a stream first used in the capture"));
    cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "begin capture");
    expect(forward(s), FA3_OK, "");
    expect(backward(nullptr, 0, s), FA3_ERR_INVALID_ARGUMENT,
           "workspace is NULL but stream is capturing a CUDA graph");
    expect(backward(workspace.get(), needed, s), FA3_OK, "");
    graph = nullptr;
    REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      INFO("replay " << replay);
      poison_outputs();
      workspace.poison();
      cuda_check(cudaGraphLaunch(exec, s), "graph launch");
      cuda_check(cudaStreamSynchronize(s), "graph replay");
      CHECK(download(kO) == want_o);
      CHECK(gradients() == want);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(fresh);
  cudaStreamDestroy(stream);
}

TEST_CASE("CUDA graphs: a global-mode capture on another thread survives the handle's first "
          "calls on other streams, which load, allocate and wait",
          "[gpu][backward]") {
  // PyTorch captures in global mode, in which the driver refuses a thread's cuMemAlloc,
  // cuMemFree, cuStreamSynchronize and cuEventQuery while any thread captures, and the refusal
  // invalidates the capture. A fresh handle's first forward with a tile counter (the module
  // load, the counters' allocation and zeroing) and first backward without a workspace (an
  // event, the workspace's allocation) run here while another thread captures.
  const int64_t D = 128;
  Case c;
  c.bf16 = true; c.head_dim = D; c.causal = true; c.batch = 2; c.seqlen_q = c.seqlen_k = 700;
  c.heads = 4; c.heads_kv = 2; c.deterministic = true;
  Runner runner;
  RandomTensors tensors(c, 701);
  fa3_tensor* x = tensors.x;
  DeviceBuffer& lse = tensors.lse;
  const fa3_params params{0.0f, 1, 1};
  const std::string drawing = tile_drawing_forward_kernel(D);
  REQUIRE_FALSE(drawing.empty());
  INFO(drawing);
  auto outputs = [&] {
    std::vector<std::vector<uint16_t>> all;
    for (const int t : {int{kO}, int{kDq}, int{kDk}, int{kDv}}) all.push_back(tensors.download(t));
    return all;
  };
  auto poison_outputs = [&] { tensors.poison_outputs(); };
  // The forward and the backward (the handle's workspace) on `stream`; each call's status and
  // sentence. No CUDA runtime call: a test's own could break the capture too.
  auto calls = [&](cudaStream_t stream, std::string* errors) {
    fa3_status st = fa3_forward_with_kernel(runner.handle(), drawing.c_str(), &x[kQ], &x[kK],
                                            &x[kV], &x[kO], lse.as<float>(), &params, stream);
    *errors = fa3_last_error();
    if (st != FA3_OK) return st;
    st = fa3_backward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], &x[kDout], lse.as<float>(),
                      &x[kDq], &x[kDk], &x[kDv], &params, nullptr, 0, stream);
    *errors = fa3_last_error();
    return st;
  };
  cudaStream_t captured, other;
  cuda_check(cudaStreamCreateWithFlags(&captured, cudaStreamNonBlocking), "stream");
  cuda_check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "stream");
  DeviceBuffer scratch(4096);
  poison_outputs();
  cuda_check(cudaDeviceSynchronize(), "the poison");

  std::atomic<int> stage{0};
  cudaError_t began = cudaErrorUnknown, ended = cudaErrorUnknown;
  cudaGraph_t graph = nullptr;
  std::thread capturer([&] {
    began = cudaStreamBeginCapture(captured, cudaStreamCaptureModeGlobal);
    if (began == cudaSuccess) cudaMemsetAsync(scratch.get(), 0, 4096, captured);
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    if (began == cudaSuccess) ended = cudaStreamEndCapture(captured, &graph);
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::string errors;
  const fa3_status during = calls(other, &errors);
  stage = 2;
  capturer.join();
  INFO(errors);
  CHECK(began == cudaSuccess);
  CHECK(during == FA3_OK);
  CHECK(ended == cudaSuccess);  // the capture was not invalidated
  if (graph) {
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    if (exec) {
      CHECK(cudaGraphLaunch(exec, captured) == cudaSuccess);
      cudaGraphExecDestroy(exec);
    }
    cudaGraphDestroy(graph);
  }
  cuda_check(cudaDeviceSynchronize(), "the calls during the capture");
  const std::vector<std::vector<uint16_t>> got = outputs();
  // The same calls with no capture anywhere: the same bits (the deterministic order).
  poison_outputs();
  REQUIRE(calls(other, &errors) == FA3_OK);
  cuda_check(cudaStreamSynchronize(other), "the calls after the capture");
  CHECK(got == outputs());
  cudaStreamDestroy(other);
  cudaStreamDestroy(captured);
}

TEST_CASE("fa3_backward honours softmax_scale; the caller's workspace", "[gpu][backward]") {
  Runner runner;
  Case c;
  c.bf16 = true; c.head_dim = 128; c.causal = true; c.batch = 2; c.seqlen_q = 300;
  c.seqlen_k = 517; c.heads = 4; c.heads_kv = 2; c.scale = 0.3f;
  INFO(c.describe());
  RunOptions caller;
  caller.workspace = Workspace::Caller;
  check_outcome(runner.run(c, 5, caller));
  c.bf16 = false; c.head_dim = 64; c.causal = false; c.scale = 0.05f;
  INFO(c.describe());
  check_outcome(runner.run(c, 6, caller));
}

TEST_CASE("fa3_backward: the handle's workspace grows and shrinks back to smaller problems",
          "[gpu][backward]") {
  Runner runner;
  uint64_t seed = 77;
  for (const int64_t seqlen : {64, 1500, 17, 3000, 200}) {
    Case c;
    c.bf16 = seqlen % 2 == 0; c.head_dim = 128; c.causal = seqlen > 1000;
    c.batch = 2; c.seqlen_q = seqlen; c.seqlen_k = 700; c.heads = 4; c.heads_kv = 1;
    INFO(c.describe());
    check_outcome(runner.run(c, seed++));
  }
}

TEST_CASE("fa3_backward is deterministic in deterministic mode, under GQA too",
          "[gpu][backward]") {
  Runner runner;
  struct Det {
    bool bf16;
    int head_dim;
    bool causal;
    int64_t batch, seqlen_q, seqlen_k, heads, heads_kv;
    Layout layout = Layout::Contiguous;
  };
  // Many key blocks add into each dQ block (and many query heads into each dK, dV under GQA):
  // an unordered reduction would differ from run to run.
  const Det dets[] = {{true, 128, false, 2, 1500, 1500, 8, 2},
                      {true, 128, true, 1, 2100, 2100, 8, 1},
                      {false, 64, false, 2, 1000, 2000, 8, 1},
                      {false, 64, true, 1, 1800, 1800, 4, 4},
                      // more tiles than SMs: the _pt kernels' ordered adds across drawn tiles
                      {true, 64, true, 2, 3000, 3000, 16, 4},
                      // long d64 causal tiles (97 steps): the _pt kernels' ordered adds
                      {false, 64, true, 1, 12300, 12300, 4, 2},
                      {false, 64, false, 1, 2000, 4100, 16, 8},
                      {true, 256, false, 1, 700, 1100, 4, 2},
                      // d64 and d256 non-causal await the next step's turn before
                      // publishing this one's (BwdConfig::dq_turn_early): more tiles than SMs
                      {true, 256, false, 2, 2000, 3000, 8, 4},
                      {false, 256, true, 1, 1300, 1300, 2, 1},
                      // causal, the later K/V blocks' adds first (BwdWork::add_rank):
                      // seqlen_k > seqlen_q (the first blocks all start at query block 0),
                      // seqlen_q > seqlen_k (rows that see no key), more tiles than SMs
                      {true, 128, true, 1, 900, 2600, 8, 2},
                      {false, 128, true, 2, 2300, 700, 4, 1},
                      {false, 128, true, 2, 2500, 2500, 16, 4},
                      {true, 256, true, 1, 500, 1400, 4, 2},
                      // 8 or more pairs to a 40 MiB L2 section: ordered adds take half
                      // (backward_l2_section), the d128 _pt and the d64 _lf walks
                      {true, 128, true, 4, 1100, 1100, 8, 8},
                      {false, 64, true, 4, 1000, 1000, 8, 8},
                      // views: packed GQA 8/2 (dq, dk, dv interleaved in one buffer), and
                      // seqlen_q > seqlen_k with dK, dV by 4-byte stores (padded outputs)
                      {true, 128, true, 2, 1100, 1100, 8, 2, Layout::Packed},
                      {false, 256, false, 1, 900, 500, 8, 2, Layout::PaddedOutputs}};
  uint64_t seed = 31;
  for (const Det& d : dets) {
    Case c;
    c.bf16 = d.bf16; c.head_dim = d.head_dim; c.causal = d.causal; c.batch = d.batch;
    c.seqlen_q = d.seqlen_q; c.seqlen_k = d.seqlen_k; c.heads = d.heads; c.heads_kv = d.heads_kv;
    c.layout = d.layout;
    c.deterministic = true;
    INFO(c.describe());
    const Outcome first = runner.run(c, seed);
    check_outcome(first);
    RunOptions quick;
    quick.check_reference = false;
    for (int run = 1; run < 10; ++run) {
      INFO("run " << run);
      const Outcome again = runner.run(c, seed, quick);
      check_outcome(again, false);
      CHECK(again.gradients == first.gradients);
    }
    // The caller's workspace (poisoned) gives the bits of the handle's.
    quick.workspace = Workspace::Caller;
    const Outcome caller = runner.run(c, seed, quick);
    check_outcome(caller, false);
    CHECK(caller.gradients == first.gradients);
    ++seed;
  }
}

// A backward (GQA 8/2, d128, bf16; by default deterministic at 1200 rows) and its gradients
// from a lone call with the handle's workspace: calls that share a workspace while another
// runs, or use one a growth freed, give other bits (deterministic) or values (not).
struct HandleWorkspaceProblem {
  static constexpr int64_t B = 2, H = 8, Hkv = 2, D = 128;
  const int64_t S;
  Case c;
  Runner runner;
  DeviceBuffer in[kTensors];
  fa3_tensor x[kTensors];
  DeviceBuffer lse;
  const fa3_params params;
  std::vector<uint16_t> want;
  float want_max_abs = 0.0f;

  explicit HandleWorkspaceProblem(int64_t seqlen = 1200, bool deterministic = true)
      : S(seqlen), lse(static_cast<size_t>(B * H * seqlen) * 4),
        params{0.0f, 0, deterministic ? 1 : 0} {
    c.bf16 = true; c.head_dim = D; c.batch = B; c.seqlen_q = c.seqlen_k = S; c.heads = H;
    c.heads_kv = Hkv; c.deterministic = deterministic;
    std::vector<uint16_t> bits;
    std::vector<float> values;
    const Plan plan = plan_of(c);
    for (int t = 0; t < kTensors; ++t) {
      in[t] = DeviceBuffer(static_cast<size_t>(c.elements(t)) * 2);
      x[t] = describe_tensor(in[t].get(), plan.at[static_cast<size_t>(t)], c, t);
      if (t == kQ || t == kK || t == kV || t == kDout) {
        random_inputs(static_cast<size_t>(c.elements(t)), true, 900 + static_cast<uint64_t>(t), &bits, &values);
        in[t].upload(bits.data(), bits.size() * 2);
      }
    }
    REQUIRE(fa3_forward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], lse.as<float>(), &params,
                        nullptr) == FA3_OK);
    for (const int t : {int{kDq}, int{kDk}, int{kDv}}) in[t].poison();
    REQUIRE(backward(&x[kDq], nullptr) == FA3_OK);
    cuda_check(cudaDeviceSynchronize(), "lone backward");
    want = gradients_of(&x[kDq]);
    CHECK(std::none_of(want.begin(), want.end(), [](uint16_t b) { return std::isnan(from_16bit(b, true)); }));
    for (uint16_t b : want) want_max_abs = std::max(want_max_abs, std::fabs(from_16bit(b, true)));
  }
  // "" when `got` (gradients_of) is the lone call's: bit for bit in the deterministic mode;
  // else within a bf16 ulp of the larger value (dQ's fp32 adds come in any order, and their
  // sum may round either way), or 1e-5 of the largest gradient (sums that nearly cancel).
  // Otherwise how many elements differ, and the first.
  std::string mismatch(const std::vector<uint16_t>& got) const {
    if (got.size() != want.size()) return "a different size";
    size_t off = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == want[i]) continue;
      const float a = from_16bit(got[i], true), b = from_16bit(want[i], true);
      const float larger = std::max(std::fabs(a), std::fabs(b));
      const float ulp = larger > 0.0f ? std::ldexp(1.0f, std::ilogb(larger) - 7) : 0.0f;
      if (!params.deterministic && std::fabs(a - b) <= std::max(ulp, 1e-5f * want_max_abs)) continue;
      if (off++ == 0) first = i;
    }
    if (off == 0) return "";
    return std::to_string(off) + " elements differ, the first at " + std::to_string(first) + ": " +
           std::to_string(from_16bit(got[first], true)) + " for " +
           std::to_string(from_16bit(want[first], true));
  }
  // dq, dk, dv of the problem's shapes in new poisoned buffers kept in `outs`.
  std::array<fa3_tensor, 3> fresh_gradients(std::vector<DeviceBuffer>* outs) const {
    std::array<fa3_tensor, 3> g;
    for (int i = 0; i < 3; ++i) {
      outs->emplace_back(static_cast<size_t>(c.elements(kDq + i)) * 2);
      outs->back().poison();
      g[static_cast<size_t>(i)] = x[kDq + i];
      g[static_cast<size_t>(i)].data = outs->back().get();
    }
    return g;
  }
  // With the handle's workspace.
  fa3_status backward(fa3_tensor* g, cudaStream_t stream) {
    return fa3_backward(runner.handle(), &x[kQ], &x[kK], &x[kV], &x[kO], &x[kDout], lse.as<float>(),
                        &g[0], &g[1], &g[2], &params, nullptr, 0, stream);
  }
  std::vector<uint16_t> gradients_of(const fa3_tensor* g) const {
    std::vector<uint16_t> all;
    for (int i = 0; i < 3; ++i) {
      std::vector<uint16_t> part(static_cast<size_t>(g[i].batch * g[i].seqlen * g[i].heads * D));
      cuda_check(cudaMemcpy(part.data(), g[i].data, part.size() * 2, cudaMemcpyDeviceToHost), "download");
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }
};

TEST_CASE("fa3_backward: threads and streams at once, each with the handle's workspace",
          "[gpu][backward]") {
  // Every thread runs the same deterministic backward on a stream of its own, three times, with
  // the handle's workspace: if two streams shared one, or a growth freed one in use, the bits
  // would differ from a lone run's.
  HandleWorkspaceProblem pr;
  constexpr int kThreads = 4, kRounds = 3;
  std::vector<std::string> failures(kThreads);
  std::vector<std::vector<std::vector<uint16_t>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        cudaSetDevice(test_device());
        cudaStream_t stream;
        cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
        std::vector<DeviceBuffer> outs;
        std::vector<std::array<fa3_tensor, 3>> grads;
        for (int r = 0; r < kRounds; ++r) grads.push_back(pr.fresh_gradients(&outs));
        for (int r = 0; r < kRounds; ++r)
          if (pr.backward(grads[static_cast<size_t>(r)].data(), stream) != FA3_OK)
            throw std::runtime_error(std::string("fa3_backward: ") + fa3_last_error());
        cuda_check(cudaStreamSynchronize(stream), "stream");
        for (int r = 0; r < kRounds; ++r) got[static_cast<size_t>(t)].push_back(pr.gradients_of(grads[static_cast<size_t>(r)].data()));
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(t)] = e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << failures[static_cast<size_t>(t)]);
    REQUIRE(failures[static_cast<size_t>(t)].empty());
    for (int r = 0; r < kRounds; ++r) {
      INFO("round " << r);
      CHECK(pr.mismatch(got[static_cast<size_t>(t)][static_cast<size_t>(r)]) == "");
    }
  }
}

// For a hang's report: whether the GPU still runs other work, on a stream of its own, beside
// the unfinished calls (a 64 MiB memset on a new stream, given 5 s). If it does, SMs are free
// and the calls wait for something other than room to run. Nothing is freed: cudaFree would
// wait for the hung calls.
static std::string other_work_runs() {
  constexpr size_t kBytes = size_t{64} << 20;
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  if (cudaMalloc(&buffer, kBytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
      cudaMemsetAsync(buffer, 0, kBytes, stream) != cudaSuccess ||
      cudaEventRecord(done, stream) != cudaSuccess)
    return "the probe of other work could not be set up";
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t q = cudaEventQuery(done);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
    if (q == cudaSuccess)
      return "a 64 MiB memset on another stream ran meanwhile (" + std::to_string(ms) + " ms)";
    if (q != cudaErrorNotReady) return std::string("the probe of other work failed: ") + cudaGetErrorString(q);
    if (ms > 5000) return "a 64 MiB memset on another stream did not run in 5 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Backward calls on streams made per call: one after another, then 40 without waiting (each
// stream dropped after its call, its work still running, or all kept until every call has
// run), with a caller's workspace each or the handle's. Every call's gradients must be the
// lone call's, and no call may be left unfinished (a bounded wait: 40 calls on 40 streams at
// once hung the GPU under programmatic dependent launch, v82).
static void streams_per_call(HandleWorkspaceProblem& pr) {
  std::vector<DeviceBuffer> outs;
  // A call on a new stream, dropped after it (its work still runs); an event after it tells
  // when it has run. `workspace`: NULL for the handle's. A Call keeps the event and the
  // workspace the call had (the pool's entry for its stream, read after the call).
  struct Call {
    cudaEvent_t done = nullptr;
    CUdeviceptr workspace = 0;
  };
  std::vector<cudaStream_t> kept;  // streams dropped only at the end, when `keep`
  auto once_on_new_stream = [&](std::array<fa3_tensor, 3>* g, void* workspace, size_t bytes,
                                bool keep = false) {
    cudaStream_t stream;
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    const fa3_status s =
        fa3_backward(pr.runner.handle(), &pr.x[kQ], &pr.x[kK], &pr.x[kV], &pr.x[kO], &pr.x[kDout],
                     pr.lse.as<float>(), &(*g)[0], &(*g)[1], &(*g)[2], &pr.params, workspace, bytes,
                     stream);
    INFO(fa3_last_error());
    REQUIRE(s == FA3_OK);
    Call c;
    c.workspace = reinterpret_cast<CUdeviceptr>(workspace);
    if (workspace == nullptr) {
      unsigned long long id = 0;
      cuda_check(cudaStreamGetId(stream, &id), "stream id");
      for (const auto& w : pr.runner.handle()->workspaces)
        if (w->stream_id == id) c.workspace = w->base;
      CHECK(c.workspace != 0);
    }
    cuda_check(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming), "event");
    cuda_check(cudaEventRecord(c.done, stream), "record");
    if (keep)
      kept.push_back(stream);
    else
      cuda_check(cudaStreamDestroy(stream), "destroy stream");
    return c;
  };
  // Waits at most 60 s for the calls: a GPU that hangs (two calls sharing a workspace's
  // counters at once would; 40 calls at once under programmatic dependent launch did, v82) is
  // reported with each unfinished call and every call's workspace, not waited on forever.
  auto wait_for = [](const std::vector<Call>& calls) {
    std::string stuck, all;
    for (int waited_ms = 0; waited_ms <= 60000; waited_ms += 10) {
      stuck.clear();
      for (size_t i = 0; i < calls.size(); ++i)
        if (cudaEventQuery(calls[i].done) == cudaErrorNotReady) stuck += " " + std::to_string(i);
      if (stuck.empty()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (size_t i = 0; i < calls.size(); ++i)
      all += " " + std::to_string(i) + "@" + std::to_string(calls[i].workspace >> 20);
    const std::string other = other_work_runs();
    std::fprintf(stderr, "backward calls unfinished after 60 s:%s (every call@workspace MiB:%s); %s\n",
                 stuck.c_str(), all.c_str(), other.c_str());
    std::fflush(stderr);
    FAIL("backward calls unfinished after 60 s:" << stuck << " (every call@workspace MiB:" << all
                                                 << "); " << other);
  };
  SECTION("each stream's call done before the next: one workspace in all") {
    for (int r = 0; r < 20; ++r) {
      std::array<fa3_tensor, 3> g = pr.fresh_gradients(&outs);
      const Call c = once_on_new_stream(&g, nullptr, 0);
      wait_for({c});
      cudaEventDestroy(c.done);
      INFO("round " << r);
      CHECK(pr.mismatch(pr.gradients_of(g.data())) == "");
    }
    CHECK(pr.runner.handle()->workspaces.size() == 1);
  }
  constexpr int kRounds = 40;
  std::vector<std::array<fa3_tensor, 3>> grads;
  for (int r = 0; r < kRounds; ++r) grads.push_back(pr.fresh_gradients(&outs));
  std::vector<Call> calls;
  // Each call with a poisoned workspace of the caller's, waited for before they are freed.
  auto with_caller_workspaces = [&](bool keep_streams) {
    size_t bytes = 0;
    REQUIRE(fa3_backward_workspace_size(pr.runner.handle(), &pr.x[kQ], &pr.x[kK], &pr.params, &bytes) == FA3_OK);
    std::vector<DeviceBuffer> workspaces;
    for (int r = 0; r < kRounds; ++r) {
      workspaces.emplace_back(bytes);
      workspaces.back().poison();
      calls.push_back(once_on_new_stream(&grads[static_cast<size_t>(r)], workspaces.back().get(),
                                         bytes, keep_streams));
    }
    wait_for(calls);
  };
  SECTION("no waiting between them, each with a workspace of the caller's") {
    with_caller_workspaces(false);
  }
  SECTION("no waiting between them, each with a workspace of the caller's, the streams kept "
          "until every call has run") {
    with_caller_workspaces(true);
    for (cudaStream_t stream : kept) cudaStreamDestroy(stream);
  }
  SECTION("no waiting between them, with the handle's: a workspace is passed on only once its call has run") {
    for (int r = 0; r < kRounds; ++r) calls.push_back(once_on_new_stream(&grads[static_cast<size_t>(r)], nullptr, 0));
    wait_for(calls);
    const size_t pool = pr.runner.handle()->workspaces.size();
    CHECK(pool <= static_cast<size_t>(kRounds));
    WARN(pool << " workspaces served " << kRounds << " streams without waiting");
  }
  for (int r = 0; r < static_cast<int>(calls.size()); ++r) {
    INFO("round " << r);
    CHECK(pr.mismatch(pr.gradients_of(grads[static_cast<size_t>(r)].data())) == "");
    cudaEventDestroy(calls[static_cast<size_t>(r)].done);
  }
}

TEST_CASE("fa3_backward: streams made and dropped per call pass the handle's workspaces on",
          "[gpu][backward]") {
  HandleWorkspaceProblem pr;  // deterministic, 1200 rows: the persistent _pt pick, ordered adds
  streams_per_call(pr);
}

TEST_CASE("fa3_backward: streams per call, not deterministic, 1000 rows (no waits between the "
          "main kernel's CTAs)",
          "[gpu][backward]") {
  HandleWorkspaceProblem pr(1000, false);  // d128 non-causal below 1024 rows: the one-tile _dqh
  streams_per_call(pr);
}

TEST_CASE("fa3_backward: streams per call, not deterministic, 1200 rows (the persistent pick: "
          "its CTAs wait only for a first store's ticket)",
          "[gpu][backward]") {
  HandleWorkspaceProblem pr(1200, false);
  streams_per_call(pr);
}

TEST_CASE("fa3_backward over 2^31 elements", "[gpu][backward][large]") {
  // dq (and q, o, dout, the fp32 dQ accumulator) of 2 x 8192 x 1032 x 128 = 2.16e9 elements:
  // offsets past 2^31 in every query-side index. The reference takes the first and last
  // (batch, K/V head) groups in full statistics, with sampled key and query rows, and query
  // rows of sampled other heads. 28 GB of GPU memory, about 30 GB of host memory.
  Case c;
  c.bf16 = true; c.head_dim = 128; c.batch = 2; c.seqlen_q = 8192; c.seqlen_k = 2048;
  c.heads = 1032; c.heads_kv = 129;
  REQUIRE(static_cast<double>(c.elements(kDq)) > 2147483648.0);
  INFO(c.describe());
  Runner runner;
  check_outcome(runner.run(c, 424242));
}

TEST_CASE("fa3_backward with K and V over 2^31 elements", "[gpu][backward][large]") {
  // k, v, dk and dv of 2 x 8192 x 1032 x 128 = 2.16e9 elements: offsets past 2^31 in every
  // key-side index, with GQA 2/1 (dK and dV summed over a group up there) and causal (the
  // persistent pick). The last (batch, K/V head) group, checked in full
  // statistics, has the largest offsets. 20 GB of GPU memory, about 35 GB of host memory.
  Case c;
  c.bf16 = false; c.head_dim = 128; c.causal = true; c.batch = 2; c.seqlen_q = 1024;
  c.seqlen_k = 8192; c.heads = 2064; c.heads_kv = 1032;
  REQUIRE(static_cast<double>(c.elements(kDk)) > 2147483648.0);
  INFO(c.describe());
  Runner runner;
  check_outcome(runner.run(c, 434343));
}

TEST_CASE("small backward cases for compute-sanitizer", "[gpu][backward][sanitize]") {
  // Few and small: under memcheck/racecheck/synccheck the kernels run orders of magnitude
  // slower. Both dtypes and every head dim, causal both ways with rows that see no key, tails in
  // both sequences, GQA, a packed layout, deterministic mode with the caller's workspace, a
  // persistent kernel's CTAs walking several tiles, every compiled kernel that splits its last
  // wave.
  Runner runner;
  Case cases[10];
  cases[0].bf16 = true; cases[0].head_dim = 128; cases[0].causal = true; cases[0].seqlen_q = 200;
  cases[0].seqlen_k = 131; cases[0].heads = 2; cases[0].heads_kv = 1;
  cases[1].bf16 = false; cases[1].head_dim = 64; cases[1].batch = 2; cases[1].seqlen_q = 65;
  cases[1].seqlen_k = 257; cases[1].heads = 2; cases[1].heads_kv = 2;
  cases[2].bf16 = true; cases[2].head_dim = 64; cases[2].causal = true; cases[2].seqlen_q = 130;
  cases[2].seqlen_k = 130; cases[2].heads = 2; cases[2].heads_kv = 1; cases[2].layout = Layout::Packed;
  cases[3].bf16 = false; cases[3].head_dim = 128; cases[3].seqlen_q = 100; cases[3].seqlen_k = 300;
  cases[3].heads = 4; cases[3].heads_kv = 1; cases[3].deterministic = true;
  cases[4].bf16 = true; cases[4].head_dim = 256; cases[4].causal = true; cases[4].seqlen_q = 150;
  cases[4].seqlen_k = 97; cases[4].heads = 2; cases[4].heads_kv = 1;
  cases[5].bf16 = false; cases[5].head_dim = 256; cases[5].seqlen_q = 130; cases[5].seqlen_k = 130;
  cases[5].heads = 2; cases[5].heads_kv = 2; cases[5].deterministic = true; cases[5].layout = Layout::Packed;
  // The d64 causal pick is persistent (_pt): 3 key blocks x 64 pairs = 192 tiles on 132 SMs,
  // so that CTAs walk several tiles (the tile counter, the carried phases, dK and dV stored from
  // the dQ buffers while the next tile runs).
  cases[6].bf16 = false; cases[6].head_dim = 64; cases[6].causal = true; cases[6].seqlen_q = 300;
  cases[6].seqlen_k = 300; cases[6].heads = 64; cases[6].heads_kv = 64;
  // So is the d128 causal pick (every length since v91), whose dV_j leaves from buffers of its own.
  cases[7].bf16 = true; cases[7].head_dim = 128; cases[7].causal = true; cases[7].seqlen_q = 300;
  cases[7].seqlen_k = 300; cases[7].heads = 64; cases[7].heads_kv = 32;
  // The d64 causal deterministic mode: the last K/V block's adds first, the tiles shortest
  // first, the counters started by the preprocess (kOrderedLastFirst), across drawn tiles.
  cases[8] = cases[6];
  cases[8].bf16 = true; cases[8].seqlen_k = 420; cases[8].deterministic = true;
  // The d256 causal deterministic mode (ordered adds under a causal mask: the K/V blocks start
  // shortest first, bwd_tile_at).
  cases[9] = cases[4];
  cases[9].bf16 = false; cases[9].seqlen_q = 200; cases[9].seqlen_k = 230; cases[9].deterministic = true;
  uint64_t seed = 4242;
  for (const Case& c : cases) {
    INFO(c.describe());
    RunOptions options;
    if (c.deterministic) options.workspace = Workspace::Caller;
    check_outcome(runner.run(c, seed++, options));
  }
  // The _dqt_rw_fs_pt kernels (80-row query blocks, rotated walks, first stores; the table's
  // d128 non-causal pick from 1024 query rows) by name on a small shape with tails in both
  // sequences, default (its 4 tiles of 16 steps split in 8 chunks: partial sums) and
  // deterministic (whole tiles), then on 192 tiles (CTAs walk several, dV_j staged in the dS^T
  // stages between them).
  Case t;
  t.bf16 = true; t.head_dim = 128; t.seqlen_q = 90; t.seqlen_k = 150; t.heads = 16; t.heads_kv = 2;
  for (const bool deterministic : {false, true}) {
    t.bf16 = !deterministic;
    t.deterministic = deterministic;
    INFO(t.describe());
    RunOptions named;
    named.kernel = deterministic ? "fa3_bwd_f16_d128_m80_n128_s2_w2_dqt_rw_fs_pt"
                                 : "fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_rw_fs_pt";
    if (deterministic) named.workspace = Workspace::Caller;
    check_outcome(runner.run(t, seed++, named));
  }
  t.bf16 = true; t.deterministic = false; t.seqlen_q = 300; t.seqlen_k = 300; t.heads = 64;
  t.heads_kv = 64;
  INFO(t.describe());
  RunOptions many;
  many.kernel = "fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_rw_fs_pt";
  check_outcome(runner.run(t, seed++, many));
  // Every compiled kernel that splits its last wave (backward_kernel_splits; the production
  // set's d128 pick, and in a lab build the lab's persistent non-causal kernels, such as d64's
  // _dqq_rw_pt, whose split no other sanitizer case names) by name on 2 tiles of the fewest
  // steps that split (a tile's steps are its query blocks times the group's query heads: here
  // 8 x 2), tails in both sequences: 4 chunks of 8 steps on any GPU of more than 3 SMs (each
  // tile in two pieces, their partial sums and the last piece's add).
  int splitting = 0;
  for (int i = 0; i < fa3_kernel_count(); ++i) {
    const std::string name = fa3_kernel_name(i);
    const auto cfg = fa3::parse_bwd_kernel_name(name);
    if (!cfg || !fa3::backward_kernel_splits(*cfg)) continue;
    ++splitting;
    Case s;
    s.bf16 = cfg->dtype == fa3::DType::BF16;
    s.head_dim = cfg->head_dim;
    s.seqlen_q = fa3::kSplitMinTileSteps / 2 * cfg->block_m - 7;
    s.seqlen_k = 2 * cfg->block_n - 30;
    s.heads = 2;
    s.heads_kv = 1;
    INFO(name << ": " << s.describe());
    const fa3::BackwardSplitPlan plan =
        fa3::backward_split_plan(*cfg, s.problem(), 2, fa3::kSplitMinTileSteps, 132);
    REQUIRE((s.seqlen_q + cfg->block_m - 1) / cfg->block_m * 2 == fa3::kSplitMinTileSteps);
    CHECK(plan.first == 0);
    CHECK(plan.draws == 4);
    RunOptions named;
    named.kernel = name;
    check_outcome(runner.run(s, seed++, named));
  }
  CHECK(splitting >= 2);  // the d128 pick, f16 and bf16
}
