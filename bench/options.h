// fa3-bench command line: the options, their parser and the --help text. Pure host code
// (no CUDA, no fa3 calls) so the tests can drive it without a GPU or a driver.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fa3bench {

enum class DType { F16, BF16 };

const char* dtype_label(DType d);  // "fp16" / "bf16", as the table prints them

// What a row times: fa3_forward; fa3_backward (on one forward's O and LSE); or both, as one
// training step's attention runs them.
enum class Direction { Fwd, Bwd, FwdBwd };

const char* direction_label(Direction d);  // "fwd" / "bwd" / "fwdbwd", as the table prints them

struct Options {
  std::vector<DType> dtypes{DType::BF16};
  std::vector<int> head_dims{64, 128, 256};
  std::vector<bool> causal{false, true};
  std::vector<int64_t> seqlens{512, 1024, 2048, 4096, 8192, 16384};  // the paper's grid
  // One-shape overrides; unset means the paper's rule (batch = 16384/S, heads = 2048/D).
  std::optional<int64_t> batch, heads, kv_heads, seqlen_q, seqlen_k;
  Direction direction = Direction::Fwd;
  bool deterministic = false;  // --deterministic: fa3_params.deterministic = 1 (backward)
  int warmup = 10;
  int iters = 30;
  int rounds = 1;        // --rounds: timing rounds interleaved over a problem's kernels
  double cooldown = 0;   // --cooldown: idle time after each kernel's launches, x their time
  std::string config;        // --config: force this kernel ("" = the tuning table's pick)
  bool all_configs = false;  // --all-configs: every compiled kernel that fits
  bool ablation = false;     // --ablation: paper Table 2 shape over every kernel
  bool check = false;
  bool baseline = true;      // --no-baseline turns the cuBLAS standard attention off
  bool list_configs = false;
  std::string csv_path, json_path, table_path;
  int device = 0;
  std::set<std::string> given;  // the options that appeared on the command line
};

// status: 0 = run with `options`; with exit_now = true the program prints `message`
// (stdout when status is 0, e.g. --help) and exits with `status`. Status 2 = argument error,
// `message` is one sentence naming the option and the rule.
struct ParseResult {
  int status = 0;
  bool exit_now = false;
  std::string message;
  Options options;
};

ParseResult parse_options(int argc, const char* const* argv);

std::string help_text();
// Every option the parser accepts ("--dtype", ..., "--help"), in --help order.
std::vector<std::string> option_names();

// The --config check that needs the list of compiled kernels (fa3_kernel_name): "" when
// `name` is one of them, else the argument-error sentence.
std::string config_name_error(const std::string& name, const std::vector<std::string>& compiled);

}  // namespace fa3bench
