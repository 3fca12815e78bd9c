#include "tune_options.h"

#include "../../bench/cli_values.h"

#include <cctype>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace fa3tune {

namespace {

using fa3bench::cli::fail;
using fa3bench::cli::launch_count;
using fa3bench::cli::non_negative;
using fa3bench::cli::non_negative_number;
using fa3bench::cli::parse_causal;
using fa3bench::cli::parse_head_dim;
using fa3bench::cli::parse_list;
using fa3bench::cli::round_count;

fa3::DType parse_dtype(const std::string& value) {
  return fa3bench::cli::parse_dtype(value) == fa3bench::DType::BF16 ? fa3::DType::BF16
                                                                     : fa3::DType::F16;
}

using OptionSpec = fa3bench::cli::OptionSpec<TuneOptions>;

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"--out", "FILE", "write the table to FILE (replaced only once the whole table is measured "
                        "and valid). Default: tuning_table.json.",
       [](TuneOptions& o, const std::string& v) {
         if (v.empty()) fail("--out needs a file name.");
         o.out_path = v;
       }},
      {"--quick", nullptr, "a short run: seqlens 1k, 4k, 16k only, 3 warm-up and 10 timed "
                           "launches in one round (unless --warmup/--iters/--rounds say "
                           "otherwise).",
       [](TuneOptions& o, const std::string&) { o.quick = true; }},
      {"--direction", "DIR", "fwd: measure the forward kernels and write the fwd entries; "
                             "bwd: the backward kernels (each checked against the float64 "
                             "backward reference first) and the bwd entries. The other "
                             "direction's entries are kept from the base table. Default: fwd.",
       [](TuneOptions& o, const std::string& v) {
         if (v == "fwd")
           o.direction = fa3::Direction::Forward;
         else if (v == "bwd")
           o.direction = fa3::Direction::Backward;
         else
           fail("--direction must be fwd or bwd (got '" + v + "').");
       }},
      {"--dtype", "LIST", "measure these dtypes: f16 (also fp16, half), bf16. Default: f16,bf16.",
       [](TuneOptions& o, const std::string& v) {
         o.dtypes = parse_list<fa3::DType>("--dtype", v, parse_dtype);
       }},
      {"--hdim", "LIST", "measure these head dims: 64, 128, 256. Default: 64,128,256.",
       [](TuneOptions& o, const std::string& v) {
         o.head_dims = parse_list<int>("--hdim", v, parse_head_dim);
       }},
      {"--causal", "LIST", "measure non-causal (0) and/or causal (1). Default: 0,1.",
       [](TuneOptions& o, const std::string& v) {
         o.causal = parse_list<bool>("--causal", v, parse_causal);
       }},
      {"--base", "FILE", "the keys not measured (see the filters) keep the entries of this "
                         "table, e.g. an earlier fa3-tune run's, instead of the built-in "
                         "table's. The report still compares with the built-in table.",
       [](TuneOptions& o, const std::string& v) {
         if (v.empty()) fail("--base needs a file name.");
         o.base_path = v;
       }},
      {"--device", "N", "CUDA device ordinal. Default: 0.",
       [](TuneOptions& o, const std::string& v) { o.device = non_negative("--device", v); }},
      {"--warmup", "N", "untimed launches before the timed ones. Default: 10 (--quick: 3).",
       [](TuneOptions& o, const std::string& v) { o.warmup = launch_count("--warmup", v, true); }},
      {"--iters", "N", "timed launches per kernel and problem; the median decides. Default: 30 "
                       "(--quick: 10).",
       [](TuneOptions& o, const std::string& v) { o.iters = launch_count("--iters", v, false); }},
      {"--rounds", "N", "timing rounds: every kernel of a bucket is timed (warm-up and --iters "
                        "launches) once per round, the rounds interleaved over the kernels, and "
                        "its figure is the median of its rounds' medians, so a slow moment of "
                        "the GPU does not decide a pick. Default: 3 (--quick: 1).",
       [](TuneOptions& o, const std::string& v) { o.rounds = round_count("--rounds", v); }},
      {"--cooldown", "X", "after each kernel's timed launches the GPU idles X times as long as "
                          "they took, so a run of minutes is measured at the clocks a short "
                          "benchmark sees, not at the power limit (0: back to back). Default: 1.",
       [](TuneOptions& o, const std::string& v) { o.cooldown = non_negative_number("--cooldown", v); }},
      {"--help", nullptr, "print this help and exit (also -h).",
       [](TuneOptions&, const std::string&) {}},
  };
  return specs;
}

constexpr size_t kHelpIndent = 18, kHelpWidth = 88;

std::string wrapped(const std::string& text) {
  return fa3bench::cli::wrap_help(text, kHelpIndent, kHelpWidth);
}


}  // namespace

std::string tune_help_text() {
  std::ostringstream out;
  out << "Usage: fa3-tune [options]\n"
         "\n"
         "Measures every compiled forward kernel (--direction bwd: backward kernel) on this GPU\n"
         "for each (dtype, head dim, causal, seqlen bucket), with fa3-bench's timing method,\n"
         "and writes the fastest as a tuning table (schema: docs/tuning_table.md). Each kernel\n"
         "is first checked against a float64 reference; a kernel that fails is reported and\n"
         "never picked. Problems: the paper's grid, seqlen_q = seqlen_k = 512..16k, batch =\n"
         "16384/seqlen, heads = 2048/head_dim. The report (stdout) shows every kernel's\n"
         "TFLOPS per bucket, the winner and its margin over the built-in table's pick. Lists\n"
         "are comma-separated (--hdim 64,128); a value follows its option or an '='\n"
         "(--iters=50).\n"
         "\n"
         "Options:\n";
  for (const OptionSpec& s : option_specs()) {
    std::string left = std::string("  ") + s.name + (s.value_name ? std::string(" ") + s.value_name : "");
    left.resize(kHelpIndent, ' ');
    out << left << wrapped(s.help) << "\n";
  }
  out << "\n"
         "Filters (--dtype, --hdim, --causal) still write a complete table: the keys not\n"
         "measured, and every key of the other direction, keep the built-in table's entries,\n"
         "or --base's (info.notes or info.bwd_notes says which).\n"
         "Exit status: 0 the table was written; 1 no driver / no Hopper GPU, a CUDA error, a\n"
         "bucket where no kernel passed its check (no table written), or a kernel that failed\n"
         "its check or did not run (the table, which never picks it, is written); 2 an\n"
         "argument error (also --out not writable, --base not a valid table, no such --device).\n"
         "Method and buckets: docs/fa3_tune.md.\n";
  return out.str();
}

TuneParseResult parse_tune_options(int argc, const char* const* argv) {
  TuneParseResult result;
  TuneOptions& o = result.options;
  std::set<std::string> given;
  try {
    if (fa3bench::cli::apply_arguments(argc, argv, option_specs(), "fa3-tune", true, o, &given)) {
      result.exit_now = true;
      result.message = tune_help_text();
      return result;
    }
    if (o.quick && !given.count("--warmup")) o.warmup = kQuickWarmup;
    if (o.quick && !given.count("--iters")) o.iters = kQuickIters;
    if (o.quick && !given.count("--rounds")) o.rounds = kQuickRounds;
  } catch (const fa3bench::cli::ArgumentError& e) {
    result.status = 2;
    result.exit_now = true;
    result.message = "fa3-tune: " + e.sentence;
  }
  return result;
}

}  // namespace fa3tune
