// fa3-tune: measures every compiled forward (--direction bwd: backward) kernel on this GPU
// and writes the tuning table (docs/fa3_tune.md).
//
//   parse options (exit 2 on an argument error) -> the built-in table and --base (exit 2 when
//   --base is not a valid table) -> the GPU check, fa3-bench's (one sentence and exit 1
//   without a driver or a Hopper GPU) -> --out must be writable (exit 2) -> per
//   key and seqlen bucket: fa3-bench's Runner (backward: BackwardRunner) checks every fitting
//   kernel against the float64 reference, then times it; the report block goes to stdout as
//   soon as the bucket is done -> merge buckets, build the table, validate it, write it
//   (atomically).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../../bench/cuda_util.h"
#include "../../bench/device.h"
#include "../../bench/backward_runner.h"
#include "../../bench/report.h"
#include "../../bench/runner.h"
#include "../../bench/timing.h"
#include "fa3/fa3.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"
#include "tune_options.h"
#include "tune_plan.h"
#include "tune_report.h"
#include "tune_table.h"

namespace fa3tune {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// fa3-bench's sentences, spoken by fa3-tune.
std::string as_tune_sentence(const std::string& bench_sentence) {
  const std::string prefix = "fa3-bench: ";
  if (bench_sentence.rfind(prefix, 0) == 0) return "fa3-tune: " + bench_sentence.substr(prefix.size());
  return "fa3-tune: " + bench_sentence;
}

// Whether `path` can be created or replaced (the table is written to a temporary file next
// to it, then renamed over it): "" when it can, else the argument-error sentence. Checked
// before the run so a bad path fails before minutes of measurement.
std::string output_path_error(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return "fa3-tune: --out " + path + " is a directory; give a file name.";
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return "fa3-tune: --out " + path + " cannot be written (directory " + dir.string() + ": " +
           std::strerror(errno) + ").";
  return "";
}

// The temporary file beside `path` has a short name of its own, not path + a suffix: a file
// name that is legal (up to 255 bytes) would otherwise make the temporary's too long, and the
// write fail only after the whole run.
bool write_file_atomically(const std::string& path, const std::string& text, std::string* error) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::string temporary =
      (dir / (".fa3-tune." + std::to_string(getpid()) + ".tmp")).string();
  {
    std::ofstream file(temporary);
    file << text;
    file.close();
    if (!file) {
      *error = "cannot write " + temporary + " (" + std::strerror(errno) + ")";
      std::remove(temporary.c_str());
      return false;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + temporary + " to " + path + " (" + std::strerror(errno) + ")";
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

// The progress line on stderr: rewritten in place on a terminal, else one line per problem.
class Progress {
 public:
  Progress() : terminal_(isatty(fileno(stderr)) != 0) {}
  void show(const std::string& problem, const std::string& stage) {
    if (terminal_) std::fprintf(stderr, "\r\033[K%s: %s", problem.c_str(), stage.c_str());
    else if (problem != last_problem_) std::fprintf(stderr, "%s ...\n", problem.c_str());
    last_problem_ = problem;
    std::fflush(stderr);
  }
  void clear() {
    if (terminal_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  bool terminal_;
  std::string last_problem_;
};

struct Gpu {
  fa3bench::DeviceInfo device;
  fa3_handle* fa3 = nullptr;
  cudaStream_t stream = nullptr;
};

bool open_gpu(int device, Gpu* gpu) {
  fa3bench::Outcome ok = fa3bench::cuda_outcome(cudaSetDevice(device), "cudaSetDevice");
  if (ok.ok) ok = fa3bench::cuda_outcome(cudaFree(nullptr), "creating the CUDA context");
  if (ok.ok) ok = fa3bench::query_device(device, &gpu->device);
  if (!ok.ok) {
    std::fprintf(stderr, "fa3-tune: %s\n", ok.reason.c_str());
    return false;
  }
  // The built-in table: fa3_forward_with_kernel names every kernel, so the table is unused.
  const fa3_status created = fa3_create(&gpu->fa3, device, nullptr);
  if (created != FA3_OK) {
    std::fprintf(stderr, "fa3-tune: fa3_create failed (%s): %s\n", fa3_status_string(created),
                 fa3_last_error());
    return false;
  }
  ok = fa3bench::cuda_outcome(cudaStreamCreateWithFlags(&gpu->stream, cudaStreamNonBlocking),
                              "cudaStreamCreate");
  if (!ok.ok) {
    std::fprintf(stderr, "fa3-tune: %s\n", ok.reason.c_str());
    fa3_destroy(gpu->fa3);
    return false;
  }
  return true;
}

std::string current_pick(const fa3::TuningTable& table, const fa3bench::Problem& p,
                         const fa3::MatchKey& key) {
  const fa3::KernelInfo* k = table.select(
      {key.direction, key.dtype, key.head_dim, key.causal, p.seqlen_q, p.seqlen_k});
  return k ? k->name : "";
}

// The rows of one problem: every kernel of the runner's list checked, then timed.
using RunProblem = std::function<std::vector<fa3bench::ResultRow>(
    const fa3bench::Problem&, const fa3bench::Progress&, fa3bench::Outcome*)>;

// One (key, bucket). *fatal is set when the CUDA context may be dead.
BucketResult measure_bucket(const RunProblem& run,
                            const std::function<std::string()>& unfitting_reason,
                            const std::vector<std::string>& fitting, const fa3::MatchKey& key,
                            const SeqlenBucket& bucket, const std::string& label,
                            Progress& progress, fa3bench::Outcome* fatal) {
  BucketResult r;
  r.key = key;
  r.bucket = bucket;
  r.problem = tune_problem(key, bucket.measured_at);
  // With no kernel named, the runners would time the table's own pick under the library's
  // call: nothing fa3-tune may choose from.
  if (fitting.empty()) {
    r.note = "no compiled kernel fits this key";
    return r;
  }
  const std::vector<fa3bench::ResultRow> rows =
      run(r.problem, [&](const std::string& stage) { progress.show(label, stage); }, fatal);
  progress.clear();
  for (const fa3bench::ResultRow& row : rows) {
    if (row.config == "-") {  // the problem failed before any kernel ran
      r.note = row.note;
      continue;
    }
    r.kernels.push_back(measurement_from_row(row));
  }
  // A kernel that fits the key but that the library refused (FA3_ERR_UNSUPPORTED) is left
  // out by the runner: list it, so the report shows it did not run.
  if (r.note.empty() && fatal->ok)
    for (const std::string& name : fitting) {
      bool ran = false;
      for (const KernelMeasurement& m : r.kernels) ran = ran || m.kernel == name;
      if (ran) continue;
      KernelMeasurement m;
      m.kernel = name;
      m.note = "fa3 refused it as unsupported (" + unfitting_reason() + ")";
      r.kernels.push_back(m);
    }
  r.winner = pick_winner(r.kernels);
  return r;
}

// "--base t.json (gpu NVIDIA H100 80GB HBM3, date 2026-11-22)": where kept entries come from,
// the base's provenance of the run's direction (a backward run's: bwd_gpu, bwd_date). In
// printable ASCII: the path goes into the table's notes, a JSON string.
std::string base_description(const std::string& path, const fa3::TuningTable& base,
                             fa3::Direction direction) {
  const std::string prefix = direction == fa3::Direction::Backward ? "bwd_" : "";
  std::string details;
  for (const char* field : {"gpu", "date"})
    for (const auto& [key, value] : base.info())
      if (key == prefix + field)
        details += (details.empty() ? "" : ", ") + std::string(field) + " " + value;
  return printable_ascii("--base " + path + (details.empty() ? "" : " (" + details + ")"));
}

// Everything that needs the GPU; returns the exit status.
// `builtin`: the table the report compares with; `base`: the one whose entries the keys not
// measured keep (the built-in table unless --base).
int tune_on_gpu(const TuneOptions& o, const fa3::TuningTable& builtin,
                const fa3::TuningTable& base, int argc, const char* const* argv) {
  Gpu gpu;
  if (!open_gpu(o.device, &gpu)) return kExitFailed;
  int status = 0;
  {  // everything on the device goes before the stream and the handle
    fa3bench::LiveClocks clocks(gpu.device.pci_bus_id);
    const std::string command = generated_by(argc, argv);
    fa3bench::Header header =
        fa3bench::make_header(gpu.device, clocks, "", o.warmup, o.iters, command, o.rounds,
                              o.cooldown);
    std::fputs(fa3bench::header_lines(header).c_str(), stdout);
    std::fflush(stdout);
    fa3bench::LaunchTimer timer;
    const fa3bench::Outcome timer_ok = timer.create(o.iters);
    if (!timer_ok.ok) {
      std::fprintf(stderr, "fa3-tune: %s\n", timer_ok.reason.c_str());
      status = kExitFailed;
    }

    const bool backward = o.direction == fa3::Direction::Backward;
    const std::vector<fa3::MatchKey> keys =
        selected_keys(o.dtypes, o.head_dims, o.causal, o.direction);
    const std::vector<SeqlenBucket> buckets = seqlen_buckets(measured_seqlens(o.quick));
    // The candidates of this direction; the table names kernels of both.
    const std::vector<fa3::KernelInfo>& kernels =
        backward ? fa3::compiled_backward_kernels() : fa3::compiled_kernels();
    const std::vector<fa3::KernelInfo>& table_kernels = fa3::compiled_forward_and_backward_kernels();
    std::vector<BucketResult> results;
    std::vector<MeasuredKey> measured;
    bool every_bucket_has_winner = true;
    Progress progress;
    const size_t total = keys.size() * buckets.size();
    for (size_t k = 0; status == 0 && k < keys.size(); ++k) {
      const fa3::MatchKey& key = keys[k];
      fa3bench::RunnerSettings settings;
      settings.warmup = o.warmup;
      settings.rounds = o.rounds;
      settings.cooldown = o.cooldown;
      settings.check = true;
      settings.baseline = false;
      settings.selection = fa3bench::KernelSelection::AllFitting;
      settings.compiled = kernels_for_key(key, kernels);
      fa3bench::Runner runner(gpu.fa3, gpu.stream, gpu.device, timer, nullptr, settings);
      fa3bench::BackwardSettings backward_settings;
      backward_settings.direction = fa3bench::Direction::Bwd;
      backward_settings.warmup = o.warmup;
      backward_settings.rounds = o.rounds;
      backward_settings.cooldown = o.cooldown;
      backward_settings.kernels = settings.compiled;
      backward_settings.check_both_orders = true;  // a pick serves both reduction orders
      fa3bench::BackwardRunner backward_runner(gpu.fa3, gpu.stream, gpu.device, timer,
                                               backward_settings);
      const RunProblem run = [&](const fa3bench::Problem& p, const fa3bench::Progress& progress,
                                 fa3bench::Outcome* fatal) {
        return backward ? backward_runner.run(p, progress, fatal) : runner.run(p, progress, fatal);
      };
      std::vector<BucketResult> key_results;
      for (size_t b = 0; b < buckets.size(); ++b) {
        const size_t index = k * buckets.size() + b + 1;
        const std::string label = "[" + std::to_string(index) + "/" + std::to_string(total) + "] " +
                                  fa3bench::problem_label(tune_problem(key, buckets[b].measured_at));
        fa3bench::Outcome fatal;
        BucketResult r = measure_bucket(
            run, [&] { return runner.last_unfitting_reason(); }, settings.compiled, key,
            buckets[b], label, progress, &fatal);
        std::printf("\n%s", bucket_report(r, current_pick(builtin, r.problem, key)).c_str());
        std::fflush(stdout);
        every_bucket_has_winner = every_bucket_has_winner && r.winner.has_value();
        key_results.push_back(r);
        results.push_back(r);
        if (!fatal.ok) {
          std::fprintf(stderr, "fa3-tune: stopping after a CUDA error, the context may be "
                               "unusable; no table is written: %s\n", fatal.reason.c_str());
          status = kExitFailed;
          break;
        }
      }
      if (status == 0) measured.push_back({key, key_ranges(key_results)});
    }
    if (status == 0) {
      std::printf("\n# clocks after the run: %s\n", clocks.describe().c_str());
      std::printf("\n# ranges (seqlen_q; seqlen_k: every length) and kernels per measured key\n%s",
                  ranges_summary(measured, builtin).c_str());
    }
    const int failures = failure_count(results);
    if (failures > 0) {
      const std::string summary = failure_summary(results);
      std::printf("\n# %d FAILURE%s (never picked):\n%s", failures, failures == 1 ? "" : "S",
                  summary.c_str());
      std::fprintf(stderr, "fa3-tune: %d kernel run%s failed (never picked):\n%s", failures,
                   failures == 1 ? "" : "s", summary.c_str());
    }
    if (status == 0 && !every_bucket_has_winner) {
      std::fprintf(stderr, "fa3-tune: a bucket has no kernel that ran and passed its check (see "
                           "the report); no table is written.\n");
      status = kExitFailed;
    }
    if (status == 0) {
      MethodSummary summary;
      summary.quick = o.quick;
      summary.warmup = o.warmup;
      summary.iters = o.iters;
      summary.rounds = o.rounds;
      summary.cooldown = o.cooldown;
      summary.buckets = buckets;
      summary.kept_keys = unmeasured_keys(measured, o.direction);
      summary.direction = o.direction;
      if (!o.base_path.empty()) summary.kept_from = base_description(o.base_path, base, o.direction);
      TableInfo info;
      info.gpu = gpu.device.name;
      info.date = utc_date(std::time(nullptr));
      info.generated_by = command;
      info.notes = method_notes(summary);
      info.direction = o.direction;
      const std::string text =
          table_text(tuning_table_json(measured, base, table_kernels, info));
      const fa3::Error invalid = validate_table(text, o.out_path, table_kernels);
      std::string write_error;
      if (invalid.failed()) {
        std::fprintf(stderr, "fa3-tune: the generated table is not valid, so it is not written "
                             "(a bug in fa3-tune): %s\n", invalid.message.c_str());
        status = kExitFailed;
      } else if (!write_file_atomically(o.out_path, text, &write_error)) {
        std::fprintf(stderr, "fa3-tune: %s.\n", write_error.c_str());
        status = kExitFailed;
      } else {
        std::printf("\nfa3-tune: wrote %s (%zu key%s measured, %zu kept from %s)\n",
                    o.out_path.c_str(), measured.size(), measured.size() == 1 ? "" : "s",
                    summary.kept_keys.size(), summary.kept_from.c_str());
        if (failures > 0) status = kExitFailed;
      }
    }
  }
  cudaStreamDestroy(gpu.stream);
  fa3_destroy(gpu.fa3);
  return status;
}

int tune_main(int argc, char** argv) {
  const TuneParseResult parsed = parse_tune_options(argc, argv);
  if (parsed.exit_now) {
    std::fputs(parsed.message.c_str(), parsed.status == 0 ? stdout : stderr);
    if (parsed.status != 0) std::fputc('\n', stderr);
    return parsed.status;
  }
  const TuneOptions& o = parsed.options;
  // The tables first: they need no GPU, and a bad --base is an argument error.
  fa3::TuningTable builtin, base;
  const fa3::Error e = fa3::TuningTable::load_builtin(&builtin);
  if (e.failed()) {
    std::fprintf(stderr, "fa3-tune: the built-in tuning table does not load: %s\n", e.message.c_str());
    return kExitFailed;
  }
  base = builtin;
  if (!o.base_path.empty()) {
    const fa3::Error b =
        fa3::TuningTable::load_file(o.base_path, fa3::compiled_forward_and_backward_kernels(), &base);
    if (b.failed()) {
      std::fprintf(stderr, "fa3-tune: --base %s is not a valid tuning table: %s\n",
                   o.base_path.c_str(), b.message.c_str());
      return kExitUsage;
    }
  }
  const fa3bench::EnvironmentCheck env = fa3bench::check_environment(o.device);
  if (env.exit_code != 0) {
    std::fprintf(stderr, "%s\n", as_tune_sentence(env.sentence).c_str());
    return env.exit_code;
  }
  const std::string path_error = output_path_error(o.out_path);
  if (!path_error.empty()) {
    std::fprintf(stderr, "%s\n", path_error.c_str());
    return kExitUsage;
  }
  return tune_on_gpu(o, builtin, base, argc, argv);
}

}  // namespace
}  // namespace fa3tune

int main(int argc, char** argv) { return fa3tune::tune_main(argc, argv); }
