// Timing of asynchronous launches with CUDA events: warm-up, then one start/stop event pair
// around each timed launch, recorded into preallocated arrays, and a single synchronization
// after the last one, so the host never waits inside the timed region.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "cuda_util.h"
#include "stats.h"

namespace fa3bench {

// Enqueues one launch on the stream using input buffer set `set`; no synchronization.
using Launch = std::function<Outcome(int set)>;

class LaunchTimer {
 public:
  LaunchTimer() = default;
  ~LaunchTimer();
  LaunchTimer(const LaunchTimer&) = delete;
  LaunchTimer& operator=(const LaunchTimer&) = delete;

  Outcome create(int iters);  // iters event pairs, reused by every measurement
  int iters() const { return static_cast<int>(start_.size()); }

  // launch(set) `warmup` times untimed, then iters() times between event pairs; launch
  // number c uses set c % sets, so consecutive launches read different buffers. c starts at
  // *next_call and *next_call is left after the last launch: the measurements of one problem
  // (its rounds, its kernels) walk on through the sets, so a set comes round again only
  // after every other one has been read. `samples` (optional) gets each timed launch's
  // milliseconds.
  Outcome measure(cudaStream_t stream, int warmup, int sets, int* next_call, const Launch& launch,
                  TimingStats* stats, std::vector<double>* samples = nullptr);

 private:
  void destroy();
  std::vector<cudaEvent_t> start_, stop_;
};

// Idles the host (and so the GPU, nothing being enqueued) factor x the summed milliseconds of
// `samples_ms` (--cooldown; RunnerSettings::cooldown says why). Nothing when factor <= 0.
void cool_down(double factor, const std::vector<double>& samples_ms);

}  // namespace fa3bench
