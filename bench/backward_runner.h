// Runs one problem of --direction bwd / fwdbwd on the GPU: uploads Q, K, V and dO into
// rotating buffer sets, runs fa3_forward once (with the LSE) for the O and LSE the backward
// reads, checks dQ, dK and dV against the float64 host reference (backward_check.h), then
// times fa3_backward (bwd) or fa3_forward + fa3_backward (fwdbwd) with the forward's
// LaunchTimer: the same warm-up, event pairs, median, rounds and L2 rotation. With a list of
// kernels (fa3-tune --direction bwd) each runs by fa3_backward_with_kernel, all checked
// against one reference and timed in rounds interleaved over them (as Runner's). The workspace
// (fa3_backward_workspace_size) is part of each buffer set, allocated before anything is
// timed. Every failure becomes the row's note; a fatal one is handed back so the sweep stops.
#pragma once

#include <cuda_runtime_api.h>

#include <optional>
#include <string>
#include <vector>

#include "backward_check.h"
#include "cuda_util.h"
#include "device.h"
#include "fa3/fa3.h"
#include "inputs.h"
#include "report.h"
#include "runner.h"
#include "timing.h"

namespace fa3bench {

struct BackwardSettings {
  Direction direction = Direction::Bwd;  // Bwd or FwdBwd
  bool deterministic = false;            // fa3_params.deterministic
  int warmup = 10;
  int rounds = 1;       // RunnerSettings::rounds: the row's median is that of its rounds' medians
  double cooldown = 0;  // RunnerSettings::cooldown
  // Empty: fa3_backward, the tuning table's pick (one row). Otherwise these kernels, each by
  // fa3_backward_with_kernel (one row each, its config the kernel's name).
  std::vector<std::string> kernels;
  // fa3-tune: the check also runs the other reduction order (deterministic flipped), since a
  // tuning-table pick serves calls in both; a kernel passes only if both orders do. The
  // timing stays in `deterministic`'s order.
  bool check_both_orders = false;
};

// What the config column shows for a backward row: the calls timed, and the reduction order.
std::string backward_config_label(const BackwardSettings& s);

// Device memory of one problem: `count` sets of the same layout, each with the inputs (Q, K,
// V, dO and the forward's O and LSE: the first inputs_end bytes, identical in every set) and
// its own outputs (dQ, dK, dV) and fa3_backward workspace. Offsets are 256-byte aligned.
struct BackwardSets {
  DeviceBuffer arena;
  size_t q_bytes = 0, kv_bytes = 0, lse_bytes = 0, workspace_bytes = 0;
  size_t q = 0, k = 0, v = 0, dout = 0, o = 0, lse = 0, inputs_end = 0;
  size_t dq = 0, dk = 0, dv = 0, workspace = 0, set_bytes = 0;
  int count = 0;
  mutable int next_call = 0;  // LaunchTimer::measure's position in the rotation over the sets
  char* at(int set, size_t offset) const;
};

class BackwardRunner {
 public:
  BackwardRunner(fa3_handle* fa3, cudaStream_t stream, const DeviceInfo& device,
                 LaunchTimer& timer, BackwardSettings settings);

  // The problem's row, or one row per kernel of BackwardSettings::kernels. A problem
  // fa3_backward does not cover (FA3_ERR_UNSUPPORTED) gives a skipped row; a kernel that does
  // not fit, a row with its note. A problem that fails before any kernel runs gives one row
  // (config "-" with a list of kernels). *fatal is set when the sweep must stop.
  std::vector<ResultRow> run(const Problem& p, const Progress& progress, Outcome* fatal);

 private:
  struct Call;

  Outcome prepare_sets(const Problem& p, BackwardSets* in);
  Outcome run_forward_once(const Problem& p, const BackwardSets& in);
  // `deterministic`: fa3_params.deterministic of the call.
  Call call_for(const Problem& p, const BackwardSets& in, int set, bool deterministic) const;
  // `kernel` "": fa3_backward; else fa3_backward_with_kernel.
  Outcome launch(const Problem& p, const BackwardSets& in, int set, const std::string& kernel,
                 bool deterministic);
  // Poisons set 0's outputs and workspace (and, for fwdbwd, its O and LSE) with NaN, runs
  // launch() on set 0 and copies dQ, dK, dV back whole.
  Outcome run_for_check(const Problem& p, const BackwardSets& in, const std::string& kernel,
                        bool deterministic, std::vector<uint16_t>* dq, std::vector<uint16_t>* dk,
                        std::vector<uint16_t>* dv);
  // The check in one reduction order: in the deterministic one, two runs bit for bit.
  // `reference` is computed on the first call for a problem and reused for its other kernels.
  Outcome check_in_order(const Problem& p, const BackwardSets& in, const std::string& kernel,
                         bool deterministic, const Progress& progress,
                         std::optional<BackwardReference>* reference, BackwardCheckResult* result);
  // check_in_order in settings_.deterministic's order, then (check_both_orders) the other.
  Outcome check_gradients(const Problem& p, const BackwardSets& in, const std::string& kernel,
                          const Progress& progress, std::optional<BackwardReference>* reference,
                          BackwardCheckResult* result);
  // The orders check_gradients runs: settings_.deterministic's first.
  std::vector<bool> checked_orders() const;
  // One round of warm-up and timed launches of `kernel`, then the cooldown.
  Outcome time_round(const Problem& p, const BackwardSets& in, const std::string& kernel,
                     TimingStats* stats, std::vector<double>* samples);

  fa3_handle* fa3_;
  cudaStream_t stream_;
  const DeviceInfo& device_;
  LaunchTimer& timer_;
  BackwardSettings settings_;
  HostInputPool pool_;
};

}  // namespace fa3bench
