#include "runner.h"

#include <algorithm>
#include <string>
#include <utility>

namespace fa3bench {

namespace {

constexpr size_t kTensorAlignment = 256;  // TMA needs 16; keep every tensor cache-line aligned

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct Fa3Tensors {
  fa3_tensor q, k, v, o;
  fa3_params params;
};

Fa3Tensors fa3_tensors(const Problem& p, const AttentionBuffers& x) {
  Fa3Tensors t;
  t.q = make_tensor(x.q, p, p.seqlen_q, p.heads);
  t.k = make_tensor(x.k, p, p.seqlen_k, p.kv_heads);
  t.v = make_tensor(x.v, p, p.seqlen_k, p.kv_heads);
  t.o = make_tensor(x.o, p, p.seqlen_q, p.heads);
  t.params.softmax_scale = 0;  // 1/sqrt(head_dim), as the reference uses
  t.params.causal = p.causal ? 1 : 0;
  return t;
}

}  // namespace

fa3_tensor make_tensor(const void* data, const Problem& p, int64_t seqlen, int64_t heads) {
  fa3_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = p.dtype == DType::BF16 ? FA3_BF16 : FA3_F16;
  t.batch = p.batch;
  t.seqlen = seqlen;
  t.heads = heads;
  t.head_dim = p.head_dim;
  t.stride_head = p.head_dim;
  t.stride_seq = heads * p.head_dim;
  t.stride_batch = seqlen * heads * p.head_dim;
  return t;
}

AttentionBuffers InputSets::set(int s) const {
  char* base = arena.data() + static_cast<size_t>(s) * set_bytes;
  return {base + q_offset, base + k_offset, base + v_offset, base + o_offset};
}

Runner::Runner(fa3_handle* fa3, cudaStream_t stream, const DeviceInfo& device, LaunchTimer& timer,
               Cublas* cublas, RunnerSettings settings)
    : fa3_(fa3), stream_(stream), device_(device), timer_(timer), cublas_(cublas),
      settings_(std::move(settings)) {}

void Runner::cool_down(const std::vector<double>& samples) const {
  fa3bench::cool_down(settings_.cooldown, samples);
}

ResultRow Runner::empty_row(const Problem& p) const {
  ResultRow row;
  row.problem = p;
  return row;
}

Outcome Runner::prepare_inputs(const Problem& p, InputSets* in) {
  in->q_bytes = static_cast<size_t>(p.q_elements()) * 2;
  in->kv_bytes = static_cast<size_t>(p.kv_elements()) * 2;
  in->q_offset = 0;
  in->k_offset = align_up(in->q_offset + in->q_bytes, kTensorAlignment);
  in->v_offset = align_up(in->k_offset + in->kv_bytes, kTensorAlignment);
  in->o_offset = align_up(in->v_offset + in->kv_bytes, kTensorAlignment);
  in->set_bytes = align_up(in->o_offset + in->q_bytes, kTensorAlignment);
  // Half of the free memory at most: the baseline's S and P come out of the other half.
  const size_t free_bytes = free_device_memory();
  in->count = buffer_sets(in->set_bytes, device_.l2_bytes, free_bytes / 2);
  if (in->count == 0)
    return Outcome::failure("out of memory: one set of Q, K, V, O needs " +
                            format_bytes(static_cast<double>(in->set_bytes)) + ", " +
                            format_bytes(static_cast<double>(free_bytes)) + " free");
  Outcome o = in->arena.allocate(static_cast<size_t>(in->count) * in->set_bytes, "input sets");
  if (!o.ok) return o;

  const size_t q_count = static_cast<size_t>(p.q_elements()), kv_count = static_cast<size_t>(p.kv_elements());
  const uint16_t* host = pool_.values(p.dtype, q_count + 2 * kv_count);
  const AttentionBuffers first = in->set(0);
  o = cuda_outcome(cudaMemcpyAsync(const_cast<void*>(first.q), host, in->q_bytes,
                                   cudaMemcpyHostToDevice, stream_), "copy Q to the device");
  if (o.ok)
    o = cuda_outcome(cudaMemcpyAsync(const_cast<void*>(first.k), host + q_count, in->kv_bytes,
                                     cudaMemcpyHostToDevice, stream_), "copy K to the device");
  if (o.ok)
    o = cuda_outcome(cudaMemcpyAsync(const_cast<void*>(first.v), host + q_count + kv_count,
                                     in->kv_bytes, cudaMemcpyHostToDevice, stream_),
                     "copy V to the device");
  // Q, K and V of set 0 are the first o_offset bytes of the set: copy them to the others.
  for (int s = 1; o.ok && s < in->count; ++s)
    o = cuda_outcome(cudaMemcpyAsync(in->arena.data() + static_cast<size_t>(s) * in->set_bytes,
                                     in->arena.data(), in->o_offset, cudaMemcpyDeviceToDevice,
                                     stream_), "copy the input sets");
  if (o.ok) o = cuda_outcome(cudaStreamSynchronize(stream_), "upload the inputs");
  return o;
}

Reference Runner::reference_for(const Problem& p) {
  const size_t q_count = static_cast<size_t>(p.q_elements()), kv_count = static_cast<size_t>(p.kv_elements());
  const uint16_t* host = pool_.values(p.dtype, q_count + 2 * kv_count);
  const std::vector<float> q = to_float(host, q_count, p.dtype);
  const std::vector<float> k = to_float(host + q_count, kv_count, p.dtype);
  const std::vector<float> v = to_float(host + q_count + kv_count, kv_count, p.dtype);
  return compute_reference(p, q.data(), k.data(), v.data());
}

Outcome Runner::choose_kernels(const Problem& p, const InputSets& in,
                               std::vector<KernelChoice>* kernels) {
  switch (settings_.selection) {
    case KernelSelection::Table: {
      const Fa3Tensors t = fa3_tensors(p, in.set(0));
      const char* name = nullptr;
      const Outcome o = fa3_outcome(fa3_forward_select(fa3_, &t.q, &t.k, &t.v, &t.params, &name),
                                    "fa3_forward_select");
      if (!o.ok) return o;
      kernels->push_back({name ? name : "?", false});
      return o;
    }
    case KernelSelection::Config:
      kernels->push_back({settings_.config, true});
      return Outcome::success();
    case KernelSelection::AllFitting:
      for (const std::string& name : settings_.compiled) kernels->push_back({name, true});
      return Outcome::success();
  }
  return Outcome::failure("internal error: unknown kernel selection");
}

Outcome Runner::launch_fa3(const Problem& p, const AttentionBuffers& x, const KernelChoice& k,
                           float* lse) {
  Fa3Tensors t = fa3_tensors(p, x);
  if (k.forced)
    return fa3_outcome(fa3_forward_with_kernel(fa3_, k.name.c_str(), &t.q, &t.k, &t.v, &t.o, lse,
                                               &t.params, stream_),
                       "fa3_forward_with_kernel");
  return fa3_outcome(fa3_forward(fa3_, &t.q, &t.k, &t.v, &t.o, lse, &t.params, stream_),
                     "fa3_forward");
}

Outcome Runner::check_output(const Problem& p, const InputSets& in, const Reference& ref,
                             const std::function<Outcome()>& launch, float* lse,
                             CheckResult* result) {
  // 0xFF bytes are NaN in fp16, bf16 and fp32: a value the kernel does not write fails.
  const size_t lse_bytes = static_cast<size_t>(p.query_rows()) * sizeof(float);
  Outcome o = cuda_outcome(cudaMemsetAsync(in.set(0).o, 0xFF, in.q_bytes, stream_), "poison O");
  if (o.ok && lse) o = cuda_outcome(cudaMemsetAsync(lse, 0xFF, lse_bytes, stream_), "poison LSE");
  if (o.ok) o = launch();
  if (o.ok) o = cuda_outcome(cudaStreamSynchronize(stream_), "run for --check");
  if (!o.ok) return o;
  std::vector<uint16_t> host_o(static_cast<size_t>(p.q_elements()));
  std::vector<float> host_lse(lse ? static_cast<size_t>(p.query_rows()) : 0);
  o = cuda_outcome(cudaMemcpy(host_o.data(), in.set(0).o, in.q_bytes, cudaMemcpyDeviceToHost),
                   "copy O to the host");
  if (o.ok && lse)
    o = cuda_outcome(cudaMemcpy(host_lse.data(), lse, lse_bytes, cudaMemcpyDeviceToHost),
                     "copy LSE to the host");
  if (!o.ok) return o;
  *result = compare_with_reference(p, ref, host_o.data(), lse ? host_lse.data() : nullptr);
  return o;
}

Outcome Runner::measure_fa3(const Problem& p, const InputSets& in, const KernelChoice& k,
                            const Reference* ref, float* lse, ResultRow* row,
                            std::vector<double>* samples) {
  if (ref) {
    // Twice: with the LSE (O and LSE checked), and O alone as it is timed, since a call with
    // an LSE runs an _ls kernel's twin (fa3_forward), a call without one the kernel itself.
    CheckResult check, o_only;
    Outcome o = check_output(
        p, in, *ref, [&] { return launch_fa3(p, in.set(0), k, lse); }, lse, &check);
    if (o.ok)
      o = check_output(
          p, in, *ref, [&] { return launch_fa3(p, in.set(0), k, nullptr); }, nullptr, &o_only);
    if (!o.ok) return o;
    check.o_error = std::max(check.o_error, o_only.o_error);
    check.pass = check.pass && o_only.pass;
    row->check = check;
  }
  TimingStats timing;
  // Timed launches pass no LSE buffer: the inference-style forward (O only).
  const Outcome o = timer_.measure(
      stream_, settings_.warmup, in.count, &in.next_call,
      [&](int set) { return launch_fa3(p, in.set(set), k, nullptr); }, &timing, samples);
  if (o.ok) row->timing = timing;
  if (o.ok && samples) cool_down(*samples);
  return o;
}

Outcome time_later_rounds(int total, std::vector<size_t> timed,
                          const std::function<Outcome(size_t, std::vector<double>*)>& time_once,
                          std::vector<std::vector<std::vector<double>>>* rounds,
                          std::vector<ResultRow>* rows, const Progress& progress) {
  for (int round = 1; round < total && !timed.empty(); ++round) {
    const size_t start = timed.size() * static_cast<size_t>(round) / static_cast<size_t>(total);
    std::vector<size_t> still_timed;
    for (size_t n = 0; n < timed.size(); ++n) {
      const size_t i = timed[(start + n) % timed.size()];
      ResultRow& row = (*rows)[i];
      progress("timing round " + std::to_string(round + 1) + " of " + std::to_string(total) +
               ": " + row.config);
      std::vector<double> samples;
      const Outcome o = time_once(i, &samples);
      if (!o.ok) {
        row.note = "timing round " + std::to_string(round + 1) + ": " + o.reason;
        row.timing.reset();
        if (o.fatal) return o;
        continue;
      }
      (*rounds)[i].push_back(std::move(samples));
      still_timed.push_back(i);
    }
    std::sort(still_timed.begin(), still_timed.end());
    timed = std::move(still_timed);
  }
  if (total > 1)
    for (size_t i : timed) (*rows)[i].timing = summarize_rounds((*rounds)[i]);
  return Outcome::success();
}

Outcome Runner::time_more_rounds(const Problem& p, const InputSets& in,
                                 const std::vector<KernelChoice>& kernels,
                                 std::vector<std::vector<std::vector<double>>>* rounds,
                                 std::vector<ResultRow>* rows, const Progress& progress) {
  std::vector<size_t> timed;
  for (size_t i = 0; i < rows->size(); ++i) {
    const ResultRow& row = (*rows)[i];
    // A kernel that failed its check is never picked: its first round is all it gets.
    if (row.timing && row.note.empty() && (!row.check || row.check->pass)) timed.push_back(i);
  }
  auto time_once = [&](size_t i, std::vector<double>* samples) {
    TimingStats stats;
    const Outcome o = timer_.measure(
        stream_, settings_.warmup, in.count, &in.next_call,
        [&](int set) { return launch_fa3(p, in.set(set), kernels[i], nullptr); }, &stats, samples);
    if (o.ok) cool_down(*samples);
    return o;
  };
  return time_later_rounds(settings_.rounds, std::move(timed), time_once, rounds, rows, progress);
}

BaselineResult Runner::measure_baseline(const Problem& p, const InputSets& in,
                                        const Reference* ref, Outcome* fatal) {
  using State = BaselineResult::State;
  BaselineResult result;
  if (!settings_.baseline) return result;
  if (!cublas_) return {State::Skipped, "no cuBLAS", {}, std::nullopt};
  const size_t scratch = standard_attention_scratch_bytes(p);
  const std::string needs = "needs " + format_bytes(static_cast<double>(scratch));
  // S and P may take half of what is free: the baseline must not push fa3's run out.
  if (scratch > free_device_memory() / 2) return {State::Skipped, needs, {}, std::nullopt};
  DeviceBuffer scores, probs;
  Outcome o = scores.allocate(scratch / 2, "S");
  if (o.ok) o = probs.allocate(scratch / 2, "P");
  if (!o.ok) {
    if (o.fatal) *fatal = o;
    return {o.fatal ? State::Failed : State::Skipped, o.fatal ? o.reason : needs, {}, std::nullopt};
  }
  auto launch = [&](int set) {
    return run_standard_attention(*cublas_, p, in.set(set), scores.data(), probs.data(), stream_);
  };
  if (ref) {
    CheckResult check;
    o = check_output(p, in, *ref, [&] { return launch(0); }, nullptr, &check);
    if (o.ok) result.check = check;
  }
  // Timed in --rounds as the rows are, so that its median is of the same kind as theirs.
  // Its launches are the run's longest: the next problem's first row must not start right
  // behind them either (--cooldown).
  std::vector<std::vector<double>> rounds;
  for (int round = 0; o.ok && round < std::max(settings_.rounds, 1); ++round) {
    std::vector<double> samples;
    TimingStats timing;
    o = timer_.measure(stream_, settings_.warmup, in.count, &in.next_call, launch, &timing,
                       &samples);
    if (!o.ok) break;
    cool_down(samples);
    result.timing = timing;
    rounds.push_back(std::move(samples));
  }
  if (o.ok && rounds.size() > 1) result.timing = summarize_rounds(rounds);
  if (!o.ok) {
    if (o.fatal) *fatal = o;
    return {State::Failed, o.reason, {}, result.check};
  }
  result.state = State::Timed;
  return result;
}

std::vector<ResultRow> Runner::run(const Problem& p, const Progress& progress, Outcome* fatal) {
  std::vector<ResultRow> rows;
  auto fail_problem = [&](const Outcome& o) {
    ResultRow row = empty_row(p);
    row.note = o.reason;
    rows.push_back(row);
    if (o.fatal) *fatal = o;
    return rows;
  };

  progress("uploading inputs");
  InputSets in;
  Outcome o = prepare_inputs(p, &in);
  if (!o.ok) return fail_problem(o);
  std::optional<Reference> reference;
  DeviceBuffer lse;
  if (settings_.check) {
    progress("computing the float64 reference on the host");
    reference = reference_for(p);
    o = lse.allocate(static_cast<size_t>(p.query_rows()) * sizeof(float), "LSE");
    if (!o.ok) return fail_problem(o);
  }
  std::vector<KernelChoice> kernels;
  o = choose_kernels(p, in, &kernels);
  if (!o.ok) return fail_problem(o);

  const bool skip_unfitting = settings_.selection != KernelSelection::Table;
  std::vector<KernelChoice> row_kernels;                       // the kernel of each row
  std::vector<std::vector<std::vector<double>>> round_samples;  // per row, per round
  for (const KernelChoice& k : kernels) {
    progress((settings_.check ? "checking and timing " : "timing ") + k.name);
    ResultRow row = empty_row(p);
    row.config = k.name;
    row.sets = in.count;
    if (settings_.variant_column) row.variant = kernel_variant(k.name);
    std::vector<double> samples;
    o = measure_fa3(p, in, k, reference ? &*reference : nullptr,
                    reinterpret_cast<float*>(lse.data()), &row, &samples);
    if (!o.ok && o.unsupported && skip_unfitting) {  // the kernel does not fit p
      last_unfitting_reason_ = o.reason;
      continue;
    }
    if (!o.ok) row.note = o.reason;
    rows.push_back(row);
    row_kernels.push_back(k);
    round_samples.push_back({});
    if (o.ok) round_samples.back().push_back(std::move(samples));
    if (o.fatal) {
      *fatal = o;
      return rows;
    }
  }
  if (settings_.rounds > 1) {
    o = time_more_rounds(p, in, row_kernels, &round_samples, &rows, progress);
    if (o.fatal) {
      *fatal = o;
      return rows;
    }
  }
  if (rows.empty()) {
    if (settings_.selection == KernelSelection::AllFitting)
      return fail_problem(Outcome::failure("no compiled kernel fits this problem (last: " +
                                           last_unfitting_reason_ + ")"));
    return rows;  // --config: the kernel does not fit; the caller counts these
  }

  lse.release();  // its memory may help the baseline's S and P fit
  if (settings_.baseline) progress("standard attention baseline");
  const BaselineResult baseline =
      measure_baseline(p, in, reference ? &*reference : nullptr, fatal);
  for (ResultRow& row : rows) row.baseline = baseline;
  return rows;
}

}  // namespace fa3bench
