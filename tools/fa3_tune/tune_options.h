// fa3-tune command line: the options, their parser and the --help text. Pure host code (no
// CUDA, no fa3 calls) so the tests can drive it without a GPU.
#pragma once

#include <string>
#include <vector>

#include "kernels/fwd_config.h"
#include "runtime/kernel_registry.h"  // fa3::Direction

namespace fa3tune {

struct TuneOptions {
  std::string out_path = "tuning_table.json";
  bool quick = false;
  // --direction: the forward kernels (fwd entries) or the backward kernels (bwd entries); the
  // other direction's entries are kept from the base table.
  fa3::Direction direction = fa3::Direction::Forward;
  // Filters: the keys measured. A filtered run still writes a complete table (the other
  // keys keep the entries of the built-in table, or of --base).
  std::vector<fa3::DType> dtypes{fa3::DType::F16, fa3::DType::BF16};
  std::vector<int> head_dims{64, 128, 256};
  std::vector<bool> causal{false, true};
  // --base: the table whose entries the keys not measured keep ("" = the built-in table).
  std::string base_path;
  int device = 0;
  int warmup = 10;  // --quick: 3 (unless --warmup is given)
  int iters = 30;   // --quick: 10 (unless --iters is given)
  int rounds = 3;   // --quick: 1 (unless --rounds is given)
  double cooldown = 1.0;  // idle after each kernel's round, as a multiple of its time
};

constexpr int kQuickWarmup = 3, kQuickIters = 10, kQuickRounds = 1;

// status 0: run with `options`. exit_now: print `message` (stdout when status is 0: --help)
// and exit with `status`; status 2 is an argument error and `message` one sentence that
// names the option and the rule.
struct TuneParseResult {
  int status = 0;
  bool exit_now = false;
  std::string message;
  TuneOptions options;
};

TuneParseResult parse_tune_options(int argc, const char* const* argv);
std::string tune_help_text();

}  // namespace fa3tune
