// Runs one problem on the GPU: uploads its inputs into rotating buffer sets, picks the
// kernel(s), checks and times fa3, then the standard-attention baseline, and returns the
// table rows. Every failure becomes a row's note; a fatal one (the CUDA context may be
// dead) is handed back so the sweep stops.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "check.h"
#include "cuda_util.h"
#include "device.h"
#include "fa3/fa3.h"
#include "inputs.h"
#include "report.h"
#include "standard_attention.h"
#include "timing.h"

namespace fa3bench {

enum class KernelSelection {
  Table,       // fa3_forward: the tuning table's pick (fa3_forward_select names it)
  Config,      // --config: one named kernel; problems it does not fit are skipped
  AllFitting,  // --all-configs / --ablation: every compiled kernel that fits
};

struct RunnerSettings {
  int warmup = 10;
  // Timing rounds per kernel (fa3-tune --rounds). With more than one, every kernel of the
  // problem is checked and timed once, then timed again in rounds 2.., all kernels in each
  // round, each round starting further down the list (so no kernel is always timed right
  // after the same one, or last); a row's median is the median of its rounds' medians
  // (summarize_rounds). One slow moment of the GPU then costs no kernel its place.
  int rounds = 1;
  // After each kernel's timed launches (each round), the GPU idles this many times as long
  // as they took (fa3-tune --cooldown). Back to back for minutes, an H100 heats up and
  // reaches its power limit, its clocks fall to ~1.5 GHz, and the kernels that win there are
  // not those that win at the clocks a benchmark of a few seconds sees (measured on an H100:
  // picks made without cooldown ran d128 at 4k/16k 694/669 TFLOPS in compare.py, the table
  // they replaced 731/729).
  double cooldown = 0;
  bool check = false;
  bool baseline = true;
  bool variant_column = false;
  KernelSelection selection = KernelSelection::Table;
  std::string config;                  // KernelSelection::Config
  std::vector<std::string> compiled;   // KernelSelection::AllFitting
};

// The descriptor of a contiguous (batch, seqlen, heads, head_dim) tensor of p's dtype at
// `data` (q, o, dout: seqlen_q and heads; k, v: seqlen_k and kv_heads).
fa3_tensor make_tensor(const void* data, const Problem& p, int64_t seqlen, int64_t heads);

// Tells the user what the runner is doing now ("timing fa3_fwd_...").
using Progress = std::function<void(const std::string& stage)>;

// Rounds 2..total of a timing in rounds (RunnerSettings::rounds), for the forward's Runner
// and the BackwardRunner: over the rows `timed` (indices, ascending) that round 1 timed,
// each round starting further down the list, so that no kernel always runs first.
// time_once(i, &samples) times row i once (its samples in ms). A row whose round fails gets
// the failure as its note, no timing, and leaves the rounds; a fatal failure ends them and
// is returned. rounds[i] holds row i's samples per round; each row still timed at the end
// gets their summary (summarize_rounds) as its timing.
Outcome time_later_rounds(int total, std::vector<size_t> timed,
                          const std::function<Outcome(size_t, std::vector<double>*)>& time_once,
                          std::vector<std::vector<std::vector<double>>>* rounds,
                          std::vector<ResultRow>* rows, const Progress& progress);

// Device pointers of the input sets of one problem: set s holds Q, K, V (identical
// contents in every set) and its own O.
struct InputSets {
  DeviceBuffer arena;
  size_t q_bytes = 0, kv_bytes = 0;
  size_t q_offset = 0, k_offset = 0, v_offset = 0, o_offset = 0, set_bytes = 0;
  int count = 0;
  mutable int next_call = 0;  // LaunchTimer::measure's position in the rotation over the sets
  AttentionBuffers set(int s) const;
};

class Runner {
 public:
  // `timer` holds one event pair per timed launch; `cublas` may be null (no baseline).
  Runner(fa3_handle* fa3, cudaStream_t stream, const DeviceInfo& device, LaunchTimer& timer,
         Cublas* cublas, RunnerSettings settings);

  // The rows of problem p: one per kernel that ran. Kernels that do not fit are left out
  // under KernelSelection::Config/AllFitting (so the result may be empty for Config).
  // *fatal is set (and the rows so far returned) when the sweep must stop.
  std::vector<ResultRow> run(const Problem& p, const Progress& progress, Outcome* fatal);

  // Why the last kernel left out as not fitting did not fit (fa3_last_error()), "" if none.
  const std::string& last_unfitting_reason() const { return last_unfitting_reason_; }

 private:
  struct KernelChoice {
    std::string name;
    bool forced = false;  // fa3_forward_with_kernel instead of fa3_forward
  };

  Outcome prepare_inputs(const Problem& p, InputSets* in);
  Reference reference_for(const Problem& p);
  Outcome choose_kernels(const Problem& p, const InputSets& in, std::vector<KernelChoice>* kernels);
  Outcome launch_fa3(const Problem& p, const AttentionBuffers& x, const KernelChoice& k, float* lse);
  Outcome measure_fa3(const Problem& p, const InputSets& in, const KernelChoice& k,
                      const Reference* ref, float* lse, ResultRow* row,
                      std::vector<double>* samples);
  // Rounds 2.. of settings_.rounds over the rows timed in round 1 (row i ran kernels[i]);
  // rounds[i] holds row i's samples per round, and each timed row's timing becomes their
  // summary. A kernel failing in a later round gets its note and leaves the rounds.
  Outcome time_more_rounds(const Problem& p, const InputSets& in,
                           const std::vector<KernelChoice>& kernels,
                           std::vector<std::vector<std::vector<double>>>* rounds,
                           std::vector<ResultRow>* rows, const Progress& progress);
  BaselineResult measure_baseline(const Problem& p, const InputSets& in, const Reference* ref,
                                  Outcome* fatal);
  // Poisons set 0's O (and lse) with NaN, runs `launch` on set 0, copies the output back and
  // compares it with the reference.
  Outcome check_output(const Problem& p, const InputSets& in, const Reference& ref,
                       const std::function<Outcome()>& launch, float* lse, CheckResult* result);
  ResultRow empty_row(const Problem& p) const;
  // settings_.cooldown x the summed milliseconds of `samples`, idle on the host.
  void cool_down(const std::vector<double>& samples) const;

  fa3_handle* fa3_;
  cudaStream_t stream_;
  const DeviceInfo& device_;
  LaunchTimer& timer_;
  Cublas* cublas_;
  RunnerSettings settings_;
  HostInputPool pool_;
  std::string last_unfitting_reason_;
};

}  // namespace fa3bench
