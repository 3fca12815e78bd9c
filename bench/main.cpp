// fa3-bench: the command-line benchmark of fa3's attention, forward and (--direction bwd,
// fwdbwd) backward (docs/bench.md).
//
//   parse options (exit 2 on an argument error) -> checks that need the library but no GPU
//   (--config, --table) -> the GPU check (one sentence and exit 1 without a driver or a
//   Hopper GPU) -> one row per problem (and kernel), streamed to stdout as it completes ->
//   CSV / JSON files at the end.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backward_runner.h"
#include "cuda_util.h"
#include "device.h"
#include "fa3/fa3.h"
#include "options.h"
#include "problems.h"
#include "report.h"
#include "runner.h"
#include "standard_attention.h"
#include "timing.h"

namespace fa3bench {
namespace {

std::vector<std::string> compiled_kernel_names() {
  std::vector<std::string> names;
  for (int i = 0; i < fa3_kernel_count(); ++i) names.push_back(fa3_kernel_name(i));
  return names;
}

bool is_forward_kernel(const std::string& name) { return name.rfind("fa3_fwd_", 0) == 0; }

// The kernels --config, --all-configs and --ablation choose from: fa3_kernel_name lists the
// backward kernels too, which fa3_forward_with_kernel does not run.
std::vector<std::string> forward_kernel_names(const std::vector<std::string>& compiled) {
  std::vector<std::string> names;
  for (const std::string& k : compiled)
    if (is_forward_kernel(k)) names.push_back(k);
  return names;
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

void print_kernel_list(const std::vector<std::string>& kernels) {
  std::printf("# %zu kernels compiled into fa3 %d.%d\n", kernels.size(), FA3_VERSION_MAJOR,
              FA3_VERSION_MINOR);
  for (const std::string& k : kernels)
    std::printf("%s  (%s)\n", k.c_str(),
                is_forward_kernel(k) ? kernel_variant(k).c_str()
                                     : "backward: fa3_backward chooses it, --config does not");
}

// Opens (and truncates) the output files; the first one that cannot be written, in a sentence.
std::string output_file_error(const Options& o) {
  for (const auto& [option, path] : {std::pair<const char*, std::string>{"--csv", o.csv_path},
                                     std::pair<const char*, std::string>{"--json", o.json_path}}) {
    if (path.empty()) continue;
    std::ofstream file(path);
    if (!file)
      return std::string("fa3-bench: ") + option + " " + path + " cannot be written (" +
             std::strerror(errno) + ").";
  }
  return "";
}

bool write_file(const std::string& path, const std::string& content) {
  std::ofstream file(path);
  file << content;
  file.close();
  if (file) return true;
  std::fprintf(stderr, "fa3-bench: could not write %s (%s).\n", path.c_str(), std::strerror(errno));
  return false;
}

// The progress line on stderr: rewritten in place with \r on a terminal; elsewhere (logs)
// one line per problem.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled), terminal_(isatty(fileno(stderr)) != 0) {}

  void show(const std::string& problem, const std::string& stage) {
    if (!enabled_) return;
    if (terminal_) {
      std::fprintf(stderr, "\r\033[K%s: %s", problem.c_str(), stage.c_str());
      visible_ = true;
    } else if (problem != last_problem_) {
      std::fprintf(stderr, "%s ...\n", problem.c_str());
    }
    last_problem_ = problem;
    std::fflush(stderr);
  }
  void clear() {
    if (!visible_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    visible_ = false;
  }

 private:
  bool enabled_, terminal_, visible_ = false;
  std::string last_problem_;
};

RunnerSettings runner_settings(const Options& o, const std::vector<std::string>& compiled) {
  RunnerSettings s;
  s.warmup = o.warmup;
  s.rounds = o.rounds;
  s.cooldown = o.cooldown;
  s.check = o.check;
  s.baseline = o.baseline;
  s.variant_column = o.ablation || o.all_configs;
  s.compiled = compiled;
  s.config = o.config;
  if (o.ablation || o.all_configs) s.selection = KernelSelection::AllFitting;
  else if (!o.config.empty()) s.selection = KernelSelection::Config;
  return s;
}

BackwardSettings backward_settings(const Options& o) {
  BackwardSettings s;
  s.direction = o.direction;
  s.deterministic = o.deterministic;
  s.warmup = o.warmup;
  s.rounds = o.rounds;
  s.cooldown = o.cooldown;
  return s;
}

ReportLayout report_layout(const Options& o, const std::vector<std::string>& compiled) {
  ReportLayout layout;
  const bool forward = o.direction == Direction::Fwd;
  layout.check = forward && o.check;
  layout.backward_check = !forward;  // the backward rows are always checked
  layout.baseline = forward && o.baseline;
  layout.variant = o.ablation || o.all_configs;
  for (const std::string& k : compiled) {
    layout.config_width = std::max(layout.config_width, static_cast<int>(k.size()));
    layout.variant_width = std::max(layout.variant_width, static_cast<int>(kernel_variant(k).size()));
  }
  return layout;
}

std::string baseline_description(const Options& o, const Cublas* cublas, const std::string& why) {
  if (o.direction != Direction::Fwd) return "none for the backward";
  if (!o.baseline) return "off (--no-baseline)";
  if (!cublas) return "unavailable: " + why + " (column std_ms says \"no cuBLAS\")";
  return "standard attention: S = QK^T (cuBLAS " + cublas->library_name() +
         "), P = softmax(S) (bench kernel), O = PV (cuBLAS); S and P in device memory in the "
         "input dtype";
}

std::string direction_description(const Options& o) {
  switch (o.direction) {
    case Direction::Fwd:
      return "fwd: fa3_forward without the LSE (inference); TFLOPS = 4*B*H*Sq*Sk*D / time, "
             "halved for causal (causal with Sq != Sk: the unmasked (i, j) pairs counted "
             "exactly)";
    case Direction::Bwd:
      return std::string("bwd: fa3_backward on one fa3_forward's O and LSE (random Q, K, V, dO), ") +
             (o.deterministic ? "deterministic" : "the faster reduction order") +
             ", its workspace allocated beforehand; TFLOPS = 2.5 x the forward's FLOPs / time; "
             "dQ, dK, dV checked against float64 first";
    case Direction::FwdBwd:
      return std::string("fwdbwd: fa3_forward with the LSE, then fa3_backward (") +
             (o.deterministic ? "deterministic" : "the faster reduction order") +
             "), timed together; TFLOPS = 3.5 x the forward's FLOPs / time; dQ, dK, dV checked "
             "against float64 first";
  }
  return "";
}

// The device, the fa3 handle and the stream every launch goes to; false (after printing
// why) when one of them cannot be had.
bool open_gpu(const Options& o, DeviceInfo* device, fa3_handle** fa3, cudaStream_t* stream) {
  Outcome ok = cuda_outcome(cudaSetDevice(o.device), "cudaSetDevice");
  if (ok.ok) ok = cuda_outcome(cudaFree(nullptr), "creating the CUDA context");
  if (ok.ok) ok = query_device(o.device, device);
  if (!ok.ok) {
    std::fprintf(stderr, "fa3-bench: %s\n", ok.reason.c_str());
    return false;
  }
  const fa3_status created =
      fa3_create(fa3, o.device, o.table_path.empty() ? nullptr : o.table_path.c_str());
  if (created != FA3_OK) {
    std::fprintf(stderr, "fa3-bench: fa3_create failed (%s): %s\n", fa3_status_string(created),
                 fa3_last_error());
    return false;
  }
  ok = cuda_outcome(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (!ok.ok) {
    std::fprintf(stderr, "fa3-bench: %s\n", ok.reason.c_str());
    fa3_destroy(*fa3);
    return false;
  }
  return true;
}

Header run_header(const Options& o, const DeviceInfo& device, const LiveClocks& clocks,
                  const Cublas* cublas, const std::string& no_cublas_reason,
                  const std::string& command) {
  Header header = make_header(device, clocks, o.table_path, o.warmup, o.iters, command,
                              o.rounds, o.cooldown);
  header.push_back({"direction", direction_description(o), std::nullopt});
  header.push_back({"baseline", baseline_description(o, cublas, no_cublas_reason), std::nullopt});
  if (o.ablation)
    header.push_back({"ablation", "the paper's Table 2 shape (batch 4, seqlen 8448, 16 heads, "
                                  "d128, non-causal, fp16); paper, H100: 661 TFLOPS with warp "
                                  "specialization + 2-stage pipelining, 582 without pipelining, "
                                  "570 without warp specialization", std::nullopt});
  return header;
}

using ProblemRunner =
    std::function<std::vector<ResultRow>(const Problem&, const Progress&, Outcome* fatal)>;

// A backward row whose check failed also gets a line of its own on stderr, saying which
// gradient broke which rule.
void print_check_failure(const ResultRow& row) {
  if (!row.backward_check || row.backward_check->pass) return;
  std::fprintf(stderr, "fa3-bench: FAIL %s %s: %s\n", direction_label(row.direction),
               problem_label(row.problem).c_str(), row.backward_check->failure.c_str());
}

// Runs every problem, printing each row as it completes; returns the exit status.
// last_unfitting_reason: --config's explanation when no problem fits its kernel.
int run_sweep(const Options& o, const ProblemRunner& run_problem,
              const std::function<std::string()>& last_unfitting_reason,
              const ReportLayout& layout, std::vector<ResultRow>* rows) {
  const std::vector<Problem> problems = build_problems(o);
  ProgressLine progress(problems.size() > 1 || o.all_configs || o.ablation);
  int status = 0;
  std::fputs(table_header(layout).c_str(), stdout);
  std::fflush(stdout);
  for (size_t i = 0; i < problems.size(); ++i) {
    const std::string label = "[" + std::to_string(i + 1) + "/" + std::to_string(problems.size()) +
                              "] " + problem_label(problems[i]);
    Outcome fatal;
    const std::vector<ResultRow> problem_rows = run_problem(
        problems[i], [&](const std::string& stage) { progress.show(label, stage); }, &fatal);
    progress.clear();
    for (const ResultRow& row : problem_rows) {
      std::fputs(table_line(row, layout).c_str(), stdout);
      std::fflush(stdout);
      print_check_failure(row);
      if (!row_succeeded(row)) status = 1;
    }
    std::fflush(stdout);
    rows->insert(rows->end(), problem_rows.begin(), problem_rows.end());
    if (!fatal.ok) {
      std::fprintf(stderr, "fa3-bench: stopping the sweep after a CUDA error, the context may be "
                           "unusable: %s\n", fatal.reason.c_str());
      return 1;
    }
  }
  if (!o.config.empty() && rows->empty()) {
    std::fprintf(stderr, "fa3-bench: --config %s fits none of the problems of this run (check "
                         "--dtype, --hdim and --causal against the kernel's name; %s).\n",
                 o.config.c_str(), last_unfitting_reason().c_str());
    return 1;
  }
  return status;
}

bool write_outputs(const Options& o, const Header& header, const ReportLayout& layout,
                   const std::vector<ResultRow>& rows) {
  bool ok = true;
  if (!o.csv_path.empty()) ok = write_file(o.csv_path, csv_document(layout, rows)) && ok;
  if (!o.json_path.empty()) ok = write_file(o.json_path, json_document(header, layout, rows)) && ok;
  return ok;
}

// Everything that needs the GPU. Returns the exit status.
int run_on_gpu(const Options& o, const std::vector<std::string>& compiled,
               const std::string& command) {
  DeviceInfo device;
  fa3_handle* fa3 = nullptr;
  cudaStream_t stream = nullptr;
  if (!open_gpu(o, &device, &fa3, &stream)) return 1;
  // The output files are opened (and truncated) once the GPU is ours, so that no failure
  // before it leaves them empty, and before the sweep, so that a bad path costs no run.
  const std::string file_error = output_file_error(o);
  if (!file_error.empty()) {
    std::fprintf(stderr, "%s\n", file_error.c_str());
    cudaStreamDestroy(stream);
    fa3_destroy(fa3);
    return 2;
  }
  int status = 0;
  {  // everything on the device goes before the stream and the handle
    std::string no_cublas_reason;
    const bool baseline = o.baseline && o.direction == Direction::Fwd;
    std::unique_ptr<Cublas> cublas = baseline ? Cublas::load(stream, &no_cublas_reason) : nullptr;
    LiveClocks clocks(device.pci_bus_id);
    Header header = run_header(o, device, clocks, cublas.get(), no_cublas_reason, command);
    std::fputs(header_lines(header).c_str(), stdout);
    LaunchTimer timer;
    const Outcome timer_ok = timer.create(o.iters);
    if (!timer_ok.ok) {
      std::fprintf(stderr, "fa3-bench: %s\n", timer_ok.reason.c_str());
      status = 1;
    } else {
      const ReportLayout layout = report_layout(o, compiled);
      std::vector<ResultRow> rows;
      if (o.direction == Direction::Fwd) {
        Runner runner(fa3, stream, device, timer, cublas.get(), runner_settings(o, compiled));
        status = run_sweep(
            o, [&](const Problem& p, const Progress& pr, Outcome* f) { return runner.run(p, pr, f); },
            [&] { return runner.last_unfitting_reason(); }, layout, &rows);
      } else {
        BackwardRunner runner(fa3, stream, device, timer, backward_settings(o));
        status = run_sweep(
            o, [&](const Problem& p, const Progress& pr, Outcome* f) { return runner.run(p, pr, f); },
            [] { return std::string(); }, layout, &rows);
      }
      header.push_back({"clocks_after", clocks.describe(), std::nullopt});
      std::printf("# clocks after the run: %s\n", header.back().text.c_str());
      if (!write_outputs(o, header, layout, rows)) status = 1;
    }
  }
  cudaStreamDestroy(stream);
  fa3_destroy(fa3);
  return status;
}

int bench_main(int argc, char** argv) {
  const ParseResult parsed = parse_options(argc, argv);
  if (parsed.exit_now) {
    std::fputs(parsed.message.c_str(), parsed.status == 0 ? stdout : stderr);
    if (parsed.status != 0) std::fputc('\n', stderr);
    return parsed.status;
  }
  const Options& o = parsed.options;
  const std::vector<std::string> all_kernels = compiled_kernel_names();
  if (o.list_configs) {
    print_kernel_list(all_kernels);
    return 0;
  }
  const std::vector<std::string> compiled = forward_kernel_names(all_kernels);
  if (!o.config.empty()) {
    const std::string error = config_name_error(o.config, compiled);
    if (!error.empty()) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 2;
    }
  }
  if (!o.table_path.empty() && fa3_tuning_table_validate(o.table_path.c_str()) != FA3_OK) {
    std::fprintf(stderr, "fa3-bench: --table %s is not a valid tuning table: %s\n",
                 o.table_path.c_str(), fa3_last_error());
    return 2;
  }
  const EnvironmentCheck env = check_environment(o.device);
  if (env.exit_code != 0) {
    std::fprintf(stderr, "%s\n", env.sentence.c_str());
    return env.exit_code;
  }
  return run_on_gpu(o, compiled, command_line(argc, argv));
}

}  // namespace
}  // namespace fa3bench

int main(int argc, char** argv) { return fa3bench::bench_main(argc, argv); }
