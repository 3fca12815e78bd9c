#include "timing.h"

#include <chrono>
#include <thread>
#include <utility>

namespace fa3bench {

LaunchTimer::~LaunchTimer() { destroy(); }

void LaunchTimer::destroy() {
  for (cudaEvent_t e : start_) cudaEventDestroy(e);
  for (cudaEvent_t e : stop_) cudaEventDestroy(e);
  start_.clear();
  stop_.clear();
}

Outcome LaunchTimer::create(int iters) {
  destroy();
  for (int i = 0; i < iters; ++i) {
    cudaEvent_t start = nullptr, stop = nullptr;
    Outcome o = cuda_outcome(cudaEventCreate(&start), "cudaEventCreate");
    if (!o.ok) return o;
    start_.push_back(start);
    o = cuda_outcome(cudaEventCreate(&stop), "cudaEventCreate");
    if (!o.ok) return o;
    stop_.push_back(stop);
  }
  return Outcome::success();
}

namespace {

// After a failed launch: let the work already enqueued finish before the caller frees its
// buffers, and report a fault it may have caused rather than the launch's own reason.
Outcome drain_after_failure(cudaStream_t stream, const Outcome& launch_failure) {
  const Outcome drained = cuda_outcome(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return drained.ok ? launch_failure : drained;
}

}  // namespace

Outcome LaunchTimer::measure(cudaStream_t stream, int warmup, int sets, int* next_call,
                             const Launch& launch, TimingStats* stats,
                             std::vector<double>* samples_out) {
  int& call = *next_call;
  call %= sets;
  for (int i = 0; i < warmup; ++i, call = (call + 1) % sets) {
    const Outcome o = launch(call);
    if (!o.ok) return drain_after_failure(stream, o);
  }
  for (int i = 0; i < iters(); ++i, call = (call + 1) % sets) {
    Outcome o = cuda_outcome(cudaEventRecord(start_[i], stream), "cudaEventRecord");
    if (o.ok) o = launch(call);
    if (o.ok) o = cuda_outcome(cudaEventRecord(stop_[i], stream), "cudaEventRecord");
    if (!o.ok) return drain_after_failure(stream, o);
  }
  // The one synchronization: everything before the last stop event has finished after it.
  Outcome o = cuda_outcome(cudaEventSynchronize(stop_.back()),
                           "cudaEventSynchronize (a launch failed on the GPU)");
  if (!o.ok) return o;
  std::vector<double> samples;
  for (int i = 0; i < iters(); ++i) {
    float ms = 0;
    o = cuda_outcome(cudaEventElapsedTime(&ms, start_[i], stop_[i]), "cudaEventElapsedTime");
    if (!o.ok) return o;
    samples.push_back(ms);
  }
  *stats = summarize(samples);
  if (samples_out) *samples_out = std::move(samples);
  return Outcome::success();
}

void cool_down(double factor, const std::vector<double>& samples_ms) {
  if (factor <= 0) return;
  double ms = 0;
  for (double s : samples_ms) ms += s;
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(factor * ms));
}

}  // namespace fa3bench
