#include "backward_runner.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

namespace fa3bench {

namespace {

constexpr size_t kAlignment = 256;  // fa3_backward's workspace needs 256; tensors TMA's 16

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

fa3_params params_for(const Problem& p, bool deterministic) {
  fa3_params params{};
  params.softmax_scale = 0;  // 1/sqrt(head_dim), as the reference uses
  params.causal = p.causal ? 1 : 0;
  params.deterministic = deterministic ? 1 : 0;
  return params;
}

// The forward's failures are never "this direction does not cover the problem": only the
// backward's FA3_ERR_UNSUPPORTED makes a skipped row.
Outcome forward_outcome(fa3_status s) {
  Outcome o = fa3_outcome(s, "fa3_forward");
  o.unsupported = false;
  return o;
}

}  // namespace

std::string backward_config_label(const BackwardSettings& s) {
  std::string label = s.direction == Direction::FwdBwd ? "fa3_forward+fa3_backward" : "fa3_backward";
  return s.deterministic ? label + "(deterministic)" : label;
}

char* BackwardSets::at(int set, size_t offset) const {
  return arena.data() + static_cast<size_t>(set) * set_bytes + offset;
}

struct BackwardRunner::Call {
  fa3_tensor q, k, v, o, dout, dq, dk, dv;
  float* lse;
  void* workspace;
  fa3_params params;
};

BackwardRunner::BackwardRunner(fa3_handle* fa3, cudaStream_t stream, const DeviceInfo& device,
                               LaunchTimer& timer, BackwardSettings settings)
    : fa3_(fa3), stream_(stream), device_(device), timer_(timer), settings_(std::move(settings)) {}

BackwardRunner::Call BackwardRunner::call_for(const Problem& p, const BackwardSets& in, int set,
                                              bool deterministic) const {
  Call c;
  c.q = make_tensor(in.at(set, in.q), p, p.seqlen_q, p.heads);
  c.k = make_tensor(in.at(set, in.k), p, p.seqlen_k, p.kv_heads);
  c.v = make_tensor(in.at(set, in.v), p, p.seqlen_k, p.kv_heads);
  c.o = make_tensor(in.at(set, in.o), p, p.seqlen_q, p.heads);
  c.dout = make_tensor(in.at(set, in.dout), p, p.seqlen_q, p.heads);
  c.dq = make_tensor(in.at(set, in.dq), p, p.seqlen_q, p.heads);
  c.dk = make_tensor(in.at(set, in.dk), p, p.seqlen_k, p.kv_heads);
  c.dv = make_tensor(in.at(set, in.dv), p, p.seqlen_k, p.kv_heads);
  c.lse = reinterpret_cast<float*>(in.at(set, in.lse));
  c.workspace = in.at(set, in.workspace);
  c.params = params_for(p, deterministic);
  return c;
}

Outcome BackwardRunner::prepare_sets(const Problem& p, BackwardSets* in) {
  in->q_bytes = static_cast<size_t>(p.q_elements()) * 2;
  in->kv_bytes = static_cast<size_t>(p.kv_elements()) * 2;
  in->lse_bytes = static_cast<size_t>(p.query_rows()) * sizeof(float);
  {
    // The size depends on the shapes alone and the call reads no tensor memory (fa3.h): any
    // aligned non-null address stands in for the buffers not allocated yet. A head dim without
    // backward kernels fails here, before anything is allocated (a skipped row).
    void* stand_in = reinterpret_cast<void*>(uintptr_t{kAlignment});
    const fa3_tensor q = make_tensor(stand_in, p, p.seqlen_q, p.heads);
    const fa3_tensor k = make_tensor(stand_in, p, p.seqlen_k, p.kv_heads);
    for (const bool deterministic : checked_orders()) {  // the larger workspace of the orders run
      const fa3_params params = params_for(p, deterministic);
      size_t bytes = 0;
      const Outcome o = fa3_outcome(fa3_backward_workspace_size(fa3_, &q, &k, &params, &bytes),
                                    "fa3_backward_workspace_size");
      if (!o.ok) return o;
      in->workspace_bytes = std::max(in->workspace_bytes, bytes);
    }
  }
  size_t at = 0;
  auto place = [&](size_t* offset, size_t bytes) {
    *offset = at;
    at = align_up(at + bytes, kAlignment);
  };
  // Inputs first: the forward writes O and LSE into set 0, then the first inputs_end bytes of
  // set 0 are copied to every other set.
  place(&in->q, in->q_bytes);
  place(&in->k, in->kv_bytes);
  place(&in->v, in->kv_bytes);
  place(&in->dout, in->q_bytes);
  place(&in->o, in->q_bytes);
  place(&in->lse, in->lse_bytes);
  in->inputs_end = at;
  place(&in->dq, in->q_bytes);
  place(&in->dk, in->kv_bytes);
  place(&in->dv, in->kv_bytes);
  place(&in->workspace, in->workspace_bytes);
  in->set_bytes = at;

  const size_t free_bytes = free_device_memory();
  in->count = buffer_sets(in->set_bytes, device_.l2_bytes, free_bytes / 2);
  if (in->count == 0)
    return Outcome::failure("out of memory: one set of Q, K, V, dO, O, LSE, dQ, dK, dV and the "
                            "workspace needs " + format_bytes(static_cast<double>(in->set_bytes)) +
                            ", " + format_bytes(static_cast<double>(free_bytes)) + " free");
  Outcome o = in->arena.allocate(static_cast<size_t>(in->count) * in->set_bytes, "buffer sets");
  if (!o.ok) return o;

  // Q, K, V as the forward direction's problem gets them (the pool's prefix), then dO.
  const size_t q_count = static_cast<size_t>(p.q_elements()), kv_count = static_cast<size_t>(p.kv_elements());
  const uint16_t* host = pool_.values(p.dtype, 2 * q_count + 2 * kv_count);
  const struct {
    size_t offset;
    const uint16_t* values;
    size_t bytes;
  } uploads[] = {{in->q, host, in->q_bytes},
                 {in->k, host + q_count, in->kv_bytes},
                 {in->v, host + q_count + kv_count, in->kv_bytes},
                 {in->dout, host + q_count + 2 * kv_count, in->q_bytes}};
  for (const auto& [offset, values, bytes] : uploads) {
    o = cuda_outcome(cudaMemcpyAsync(in->at(0, offset), values, bytes, cudaMemcpyHostToDevice,
                                     stream_), "copy the inputs to the device");
    if (!o.ok) return o;
  }
  return cuda_outcome(cudaStreamSynchronize(stream_), "upload the inputs");
}

Outcome BackwardRunner::run_forward_once(const Problem& p, const BackwardSets& in) {
  Call c = call_for(p, in, 0, settings_.deterministic);
  Outcome o = forward_outcome(fa3_forward(fa3_, &c.q, &c.k, &c.v, &c.o, c.lse, &c.params, stream_));
  for (int s = 1; o.ok && s < in.count; ++s)
    o = cuda_outcome(cudaMemcpyAsync(in.at(s, 0), in.at(0, 0), in.inputs_end,
                                     cudaMemcpyDeviceToDevice, stream_), "copy the input sets");
  if (o.ok) o = cuda_outcome(cudaStreamSynchronize(stream_), "fa3_forward for O and LSE");
  return o;
}

Outcome BackwardRunner::launch(const Problem& p, const BackwardSets& in, int set,
                               const std::string& kernel, bool deterministic) {
  Call c = call_for(p, in, set, deterministic);
  if (settings_.direction == Direction::FwdBwd) {
    // A training step's forward: with the LSE the backward needs.
    const Outcome o =
        forward_outcome(fa3_forward(fa3_, &c.q, &c.k, &c.v, &c.o, c.lse, &c.params, stream_));
    if (!o.ok) return o;
  }
  if (!kernel.empty())
    return fa3_outcome(fa3_backward_with_kernel(fa3_, kernel.c_str(), &c.q, &c.k, &c.v, &c.o,
                                                &c.dout, c.lse, &c.dq, &c.dk, &c.dv, &c.params,
                                                c.workspace, in.workspace_bytes, stream_),
                       "fa3_backward_with_kernel");
  return fa3_outcome(fa3_backward(fa3_, &c.q, &c.k, &c.v, &c.o, &c.dout, c.lse, &c.dq, &c.dk,
                                  &c.dv, &c.params, c.workspace, in.workspace_bytes, stream_),
                     "fa3_backward");
}

Outcome BackwardRunner::run_for_check(const Problem& p, const BackwardSets& in,
                                      const std::string& kernel, bool deterministic,
                                      std::vector<uint16_t>* dq, std::vector<uint16_t>* dk,
                                      std::vector<uint16_t>* dv) {
  // 0xFF bytes are NaN in fp16, bf16 and fp32: a gradient the backward does not write, or a
  // workspace it reads before writing (the contract promises it nothing), fails the check.
  std::vector<std::pair<size_t, size_t>> poisoned = {
      {in.dq, in.q_bytes}, {in.dk, in.kv_bytes}, {in.dv, in.kv_bytes},
      {in.workspace, in.workspace_bytes}};
  if (settings_.direction == Direction::FwdBwd) {  // the forward of the step writes them
    poisoned.push_back({in.o, in.q_bytes});
    poisoned.push_back({in.lse, in.lse_bytes});
  }
  Outcome o = Outcome::success();
  for (const auto& [offset, bytes] : poisoned)
    if (o.ok) o = cuda_outcome(cudaMemsetAsync(in.at(0, offset), 0xFF, bytes, stream_), "poison the outputs");
  if (o.ok) o = launch(p, in, 0, kernel, deterministic);
  if (o.ok) o = cuda_outcome(cudaStreamSynchronize(stream_), "run for the check");
  if (!o.ok) return o;
  dq->resize(in.q_bytes / 2);
  dk->resize(in.kv_bytes / 2);
  dv->resize(in.kv_bytes / 2);
  o = cuda_outcome(cudaMemcpy(dq->data(), in.at(0, in.dq), in.q_bytes, cudaMemcpyDeviceToHost),
                   "copy dQ to the host");
  if (o.ok)
    o = cuda_outcome(cudaMemcpy(dk->data(), in.at(0, in.dk), in.kv_bytes, cudaMemcpyDeviceToHost),
                     "copy dK to the host");
  if (o.ok)
    o = cuda_outcome(cudaMemcpy(dv->data(), in.at(0, in.dv), in.kv_bytes, cudaMemcpyDeviceToHost),
                     "copy dV to the host");
  return o;
}

std::vector<bool> BackwardRunner::checked_orders() const {
  if (settings_.check_both_orders) return {settings_.deterministic, !settings_.deterministic};
  return {settings_.deterministic};
}

Outcome BackwardRunner::check_gradients(const Problem& p, const BackwardSets& in,
                                        const std::string& kernel, const Progress& progress,
                                        std::optional<BackwardReference>* reference,
                                        BackwardCheckResult* result) {
  Outcome o = Outcome::success();
  for (const bool deterministic : checked_orders()) {
    BackwardCheckResult order;
    o = check_in_order(p, in, kernel, deterministic, progress, reference, &order);
    if (!o.ok) return o;
    if (deterministic == settings_.deterministic) {
      *result = order;  // the errors shown are those of the order timed
    } else if (!order.pass) {
      result->pass = false;
      result->failure += (result->failure.empty() ? "" : "; ") +
                         std::string(deterministic ? "deterministic order: " : "default order: ") +
                         order.failure;
    }
  }
  return o;
}

Outcome BackwardRunner::check_in_order(const Problem& p, const BackwardSets& in,
                                       const std::string& kernel, bool deterministic,
                                       const Progress& progress,
                                       std::optional<BackwardReference>* reference,
                                       BackwardCheckResult* result) {
  std::vector<uint16_t> dq, dk, dv;
  Outcome o = run_for_check(p, in, kernel, deterministic, &dq, &dk, &dv);
  if (!o.ok) return o;
  std::string not_repeated;  // deterministic: the gradients whose bits a second run changed
  if (deterministic) {
    std::vector<uint16_t> dq2, dk2, dv2;
    o = run_for_check(p, in, kernel, deterministic, &dq2, &dk2, &dv2);
    if (!o.ok) return o;
    for (const auto& [name, first, second] : {std::tuple{"dq", &dq, &dq2}, std::tuple{"dk", &dk, &dk2},
                                              std::tuple{"dv", &dv, &dv2}})
      if (*first != *second) not_repeated += (not_repeated.empty() ? "" : ", ") + std::string(name);
  }

  if (!reference->has_value()) {
    progress("computing the float64 backward reference on the host");
    const size_t q_count = static_cast<size_t>(p.q_elements()), kv_count = static_cast<size_t>(p.kv_elements());
    const uint16_t* host = pool_.values(p.dtype, 2 * q_count + 2 * kv_count);
    const std::vector<float> q = to_float(host, q_count, p.dtype);
    const std::vector<float> k = to_float(host + q_count, kv_count, p.dtype);
    const std::vector<float> v = to_float(host + q_count + kv_count, kv_count, p.dtype);
    const std::vector<float> dout = to_float(host + q_count + 2 * kv_count, q_count, p.dtype);
    *reference = compute_backward_reference(p, q.data(), k.data(), v.data(), dout.data());
  }
  *result = compare_backward(p, **reference, dq.data(), dk.data(), dv.data());
  if (!not_repeated.empty()) {
    result->pass = false;
    result->failure += (result->failure.empty() ? "" : "; ") + not_repeated +
                       " differ between two deterministic runs";
  }
  return o;
}

Outcome BackwardRunner::time_round(const Problem& p, const BackwardSets& in,
                                   const std::string& kernel, TimingStats* stats,
                                   std::vector<double>* samples) {
  const Outcome o = timer_.measure(
      stream_, settings_.warmup, in.count, &in.next_call,
      [&](int set) { return launch(p, in, set, kernel, settings_.deterministic); },
      stats, samples);
  if (o.ok) cool_down(settings_.cooldown, *samples);
  return o;
}

std::vector<ResultRow> BackwardRunner::run(const Problem& p, const Progress& progress,
                                           Outcome* fatal) {
  const bool named = !settings_.kernels.empty();
  // "": fa3_backward, the table's pick.
  const std::vector<std::string> kernels = named ? settings_.kernels : std::vector<std::string>{""};
  ResultRow problem_row;
  problem_row.problem = p;
  problem_row.direction = settings_.direction;
  problem_row.config = named ? "-" : backward_config_label(settings_);
  // A failure of the whole problem (or, below, of one kernel): its row's note.
  auto note_failure = [&](ResultRow* row, const Outcome& o) {
    if (o.unsupported) {
      row->skipped = true;
      row->note = "skipped: " + o.reason;
    } else {
      row->note = o.reason;
    }
    if (o.fatal) *fatal = o;
  };
  auto stop = [&](const Outcome& o) {
    note_failure(&problem_row, o);
    return std::vector<ResultRow>{problem_row};
  };

  progress("uploading inputs");
  BackwardSets in;
  Outcome o = prepare_sets(p, &in);
  if (!o.ok) return stop(o);
  problem_row.sets = in.count;
  progress("fa3_forward for O and LSE");
  o = run_forward_once(p, in);
  if (!o.ok) return stop(o);

  // Round 1: each kernel checked, then timed.
  std::optional<BackwardReference> reference;
  std::vector<ResultRow> rows;
  std::vector<std::vector<std::vector<double>>> rounds(kernels.size());
  std::vector<size_t> timed;
  for (size_t i = 0; i < kernels.size(); ++i) {
    ResultRow row = problem_row;
    if (named) row.config = kernels[i];
    progress("checking " + row.config);
    BackwardCheckResult check;
    o = check_gradients(p, in, kernels[i], progress, &reference, &check);
    if (o.ok) {
      row.backward_check = check;
      if (settings_.rounds > 1)
        progress("timing round 1 of " + std::to_string(settings_.rounds) + ": " + row.config);
      else
        progress("timing " + row.config);
      TimingStats stats;
      std::vector<double> samples;
      o = time_round(p, in, kernels[i], &stats, &samples);
      if (o.ok) {
        row.timing = stats;
        rounds[i].push_back(std::move(samples));
        // A kernel that failed its check is never picked: its first round is all it gets.
        if (check.pass) timed.push_back(i);
      }
    }
    if (!o.ok) note_failure(&row, o);
    rows.push_back(row);
    if (!fatal->ok) return rows;
  }
  // Rounds 2..: over the kernels still timed (Runner's order).
  auto time_once = [&](size_t i, std::vector<double>* samples) {
    TimingStats stats;
    return time_round(p, in, kernels[i], &stats, samples);
  };
  o = time_later_rounds(settings_.rounds, std::move(timed), time_once, &rounds, &rows, progress);
  if (o.fatal) *fatal = o;
  return rows;
}

}  // namespace fa3bench
