#include "options.h"

#include "cli_values.h"
#include "problems.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <sstream>

namespace fa3bench {

const char* dtype_label(DType d) { return d == DType::F16 ? "fp16" : "bf16"; }

const char* direction_label(Direction d) {
  switch (d) {
    case Direction::Fwd: return "fwd";
    case Direction::Bwd: return "bwd";
    case Direction::FwdBwd: return "fwdbwd";
  }
  return "?";
}

namespace {

using cli::fail;
using cli::launch_count;
using cli::lowercase;
using cli::non_negative;
using cli::non_negative_number;
using cli::parse_causal;
using cli::parse_dtype;
using cli::parse_head_dim;
using cli::parse_list;
using cli::positive;
using cli::round_count;

Direction parse_direction(const std::string& value) {
  const std::string v = lowercase(value);
  if (v == "fwd" || v == "forward") return Direction::Fwd;
  if (v == "bwd" || v == "backward") return Direction::Bwd;
  if (v == "fwdbwd" || v == "fwd+bwd" || v == "both") return Direction::FwdBwd;
  fail("--direction must be fwd, bwd or fwdbwd, got '" + value + "'.");
}

using OptionSpec = cli::OptionSpec<Options>;

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"--dtype", "LIST", "input dtypes: fp16 (also f16, half), bf16. Default: bf16.",
       [](Options& o, const std::string& v) {
         o.dtypes = parse_list<DType>("--dtype", v, parse_dtype);
       }},
      {"--hdim", "LIST", "head dims: 64, 128, 256. Default: 64,128,256.",
       [](Options& o, const std::string& v) {
         o.head_dims = parse_list<int>("--hdim", v, parse_head_dim);
       }},
      {"--causal", "LIST", "0 (full), 1 (causal, bottom-right aligned when seqlen_q != seqlen_k). "
                           "Default: 0,1.",
       [](Options& o, const std::string& v) {
         o.causal = parse_list<bool>("--causal", v, parse_causal);
       }},
      {"--seqlen", "LIST", "sequence lengths (N or Nk = N*1024) with seqlen_q = seqlen_k. Default: "
                           "the paper's grid 512,1k,2k,4k,8k,16k.",
       [](Options& o, const std::string& v) {
         o.seqlens = parse_list<int64_t>("--seqlen", v, [](const std::string& item) {
           return positive("--seqlen", item, true);
         });
       }},
      {"--batch", "N", "batch size. Default: the paper's 16384/seqlen_q (at least 1).",
       [](Options& o, const std::string& v) { o.batch = positive("--batch", v); }},
      {"--heads", "N", "query heads. Default: the paper's 2048/head_dim.",
       [](Options& o, const std::string& v) { o.heads = positive("--heads", v); }},
      {"--kv-heads", "N", "key/value heads (GQA/MQA); must divide the query heads. Default: = heads.",
       [](Options& o, const std::string& v) { o.kv_heads = positive("--kv-heads", v); }},
      {"--seqlen-q", "N", "query length of one shape (replaces --seqlen). Default: = --seqlen-k.",
       [](Options& o, const std::string& v) { o.seqlen_q = positive("--seqlen-q", v, true); }},
      {"--seqlen-k", "N", "key/value length of one shape (replaces --seqlen). Default: = --seqlen-q.",
       [](Options& o, const std::string& v) { o.seqlen_k = positive("--seqlen-k", v, true); }},
      {"--direction", "DIR", "fwd: fa3_forward (O only, as inference calls it). bwd: one "
                             "fa3_backward call (dQ, dK, dV from one fa3_forward's O and LSE, "
                             "the workspace allocated beforehand), checked against a float64 "
                             "host reference first. fwdbwd: fa3_forward with the LSE, then "
                             "fa3_backward, timed as one (checked as bwd). A problem no "
                             "backward kernel covers gets a row that says skipped. Default: fwd.",
       [](Options& o, const std::string& v) { o.direction = parse_direction(v); }},
      {"--deterministic", nullptr, "bwd, fwdbwd: fa3_params.deterministic = 1 (dQ, dK, dV "
                                   "bitwise identical from run to run; the check then also runs "
                                   "the backward twice and compares the bits).",
       [](Options& o, const std::string&) { o.deterministic = true; }},
      {"--warmup", "N", "untimed launches before the timed ones. Default: 10.",
       [](Options& o, const std::string& v) { o.warmup = launch_count("--warmup", v, true); }},
      {"--iters", "N", "timed launches; the table shows their median, p10 and p90. Default: 30.",
       [](Options& o, const std::string& v) { o.iters = launch_count("--iters", v, false); }},
      {"--rounds", "N", "time each row in N rounds, the rounds interleaved over the rows of a "
                        "problem (--all-configs, --ablation: its kernels); a row's median is "
                        "the median of its rounds' medians, so a slow moment of the GPU does "
                        "not decide between kernels. Default: 1.",
       [](Options& o, const std::string& v) { o.rounds = round_count("--rounds", v); }},
      {"--cooldown", "X", "after each row's timed launches (and the baseline's) the GPU idles "
                          "X times as long as they took: kernels timed one after another then "
                          "run at the clocks of a short benchmark, not at the power limit. "
                          "Default: 0.",
       [](Options& o, const std::string& v) { o.cooldown = non_negative_number("--cooldown", v); }},
      {"--config", "NAME", "time this compiled kernel (fa3_forward_with_kernel) instead of the "
                           "tuning table's pick; problems it does not fit are skipped. "
                           "--list-configs shows the names.",
       [](Options& o, const std::string& v) {
         if (v.empty()) fail("--config needs a kernel name (see fa3-bench --list-configs).");
         o.config = v;
       }},
      {"--all-configs", nullptr, "time every compiled kernel that fits each problem, one row each.",
       [](Options& o, const std::string&) { o.all_configs = true; }},
      {"--ablation", nullptr, "the paper's Table 2: batch 4, seqlen 8448, 16 heads, d128, "
                              "non-causal, fp16, over every compiled kernel, with a variant "
                              "column (the kernel's options: loop, producer, pingpong, ...).",
       [](Options& o, const std::string&) { o.ablation = true; }},
      {"--check", nullptr, "verify each output (O and LSE) against a float64 host reference on "
                           "sampled rows before timing it; rule: error <= 2 x plain "
                           "same-precision attention's error + 1e-5. --direction bwd and "
                           "fwdbwd always check dQ, dK and dV this way.",
       [](Options& o, const std::string&) { o.check = true; }},
      {"--no-baseline", nullptr, "skip the standard-attention baseline (cuBLAS GEMM, softmax, "
                                 "GEMM with S and P in device memory; forward only: bwd and "
                                 "fwdbwd rows have none).",
       [](Options& o, const std::string&) { o.baseline = false; }},
      {"--csv", "FILE", "also write every row (every column of the table) to FILE as CSV.",
       [](Options& o, const std::string& v) {
         if (v.empty()) fail("--csv needs a file name.");
         o.csv_path = v;
       }},
      {"--json", "FILE", "also write the header and every row to FILE as JSON.",
       [](Options& o, const std::string& v) {
         if (v.empty()) fail("--json needs a file name.");
         o.json_path = v;
       }},
      {"--device", "N", "CUDA device ordinal. Default: 0.",
       [](Options& o, const std::string& v) { o.device = non_negative("--device", v); }},
      {"--table", "FILE", "tuning table JSON passed to fa3_create. Default: the built-in table.",
       [](Options& o, const std::string& v) {
         if (v.empty()) fail("--table needs a file name.");
         o.table_path = v;
       }},
      {"--list-configs", nullptr, "print the kernels compiled into fa3 and exit (no GPU needed).",
       [](Options& o, const std::string&) { o.list_configs = true; }},
      {"--help", nullptr, "print this help and exit (also -h).", [](Options&, const std::string&) {}},
  };
  return specs;
}


bool given(const Options& o, const char* name) { return o.given.count(name) != 0; }

// Rules between options, checked after every option is read.
void check_combinations(const Options& o) {
  const bool one_shape = given(o, "--seqlen-q") || given(o, "--seqlen-k");
  if (one_shape && given(o, "--seqlen"))
    fail("--seqlen cannot be combined with --seqlen-q/--seqlen-k; use one or the other.");
  if (!o.config.empty() && o.all_configs)
    fail("--config and --all-configs exclude each other: one kernel or all of them.");
  if (o.direction != Direction::Fwd) {
    for (const char* name : {"--config", "--all-configs", "--ablation"})
      if (given(o, name))
        fail(std::string(name) + " chooses forward kernels and cannot be combined with "
                                 "--direction " + direction_label(o.direction) + ".");
  } else if (o.deterministic) {
    fail("--deterministic applies to the backward pass: pass --direction bwd or fwdbwd.");
  }
  if (o.ablation) {
    for (const char* name : {"--dtype", "--hdim", "--causal", "--seqlen", "--batch", "--heads",
                             "--kv-heads", "--seqlen-q", "--seqlen-k", "--config", "--all-configs"})
      if (given(o, name))
        fail(std::string("--ablation runs the fixed shape of the paper's Table 2 over every "
                         "kernel and cannot be combined with ") + name + ".");
  }
  if (o.kv_heads) {
    if (o.heads) {
      if (*o.heads % *o.kv_heads != 0)
        fail("--kv-heads " + std::to_string(*o.kv_heads) + " must divide --heads " +
             std::to_string(*o.heads) + ".");
    } else {
      for (int d : o.head_dims)
        if ((2048 / d) % *o.kv_heads != 0)
          fail("--kv-heads " + std::to_string(*o.kv_heads) + " must divide the number of heads (" +
               std::to_string(2048 / d) + " = 2048/" + std::to_string(d) + " for --hdim " +
               std::to_string(d) + "); pass --heads too.");
    }
  }
}

// Tensors past 2^61 elements (2^62 bytes) fit no GPU, and their element counts, offsets and
// row counts would overflow int64 in the host code (the reference, the row sampling, the
// buffer sizes) before fa3's own checks ever saw the shape: refused here, as an argument.
void check_sizes(const Options& o) {
  const __int128 limit = static_cast<__int128>(1) << 61;
  for (const Problem& p : build_problems(o)) {
    const __int128 rows = static_cast<__int128>(p.batch) * p.heads;
    const __int128 q = rows * p.seqlen_q * p.head_dim;
    const __int128 kv = static_cast<__int128>(p.batch) * p.kv_heads * p.seqlen_k * p.head_dim;
    if (q > limit || kv > limit)
      fail("--batch x --heads x --seqlen x --hdim gives " + problem_label(p) +
           " tensors of more than 2^61 elements, which no GPU holds; give smaller sizes.");
  }
}

constexpr size_t kHelpIndent = 22, kHelpWidth = 92;

std::string wrapped(const std::string& text) { return cli::wrap_help(text, kHelpIndent, kHelpWidth); }

}  // namespace

std::vector<std::string> option_names() {
  std::vector<std::string> names;
  for (const OptionSpec& s : option_specs()) names.push_back(s.name);
  return names;
}

std::string help_text() {
  std::ostringstream out;
  out << "Usage: fa3-bench [options]\n"
         "\n"
         "Times fa3's forward attention on the GPU (CUDA events, median of --iters launches\n"
         "after --warmup, inputs rotated over enough buffer sets to exceed 3x the L2 cache)\n"
         "next to the standard attention baseline, and prints one row per problem;\n"
         "--direction bwd / fwdbwd times the backward (alone / after the forward) alike.\n"
         "Default: the paper's grid (Section 4.1): seqlen 512..16k, batch = 16384/seqlen,\n"
         "heads = 2048/head_dim, over --dtype x --hdim x --causal.\n"
         "TFLOPS = 4*batch*heads*seqlen_q*seqlen_k*head_dim / time, halved for causal\n"
         "(causal with seqlen_q != seqlen_k counts the unmasked (i,j) pairs exactly);\n"
         "--direction bwd counts 2.5x that (the paper: the backward's 5 GEMMs to the\n"
         "forward's 2), fwdbwd 3.5x.\n"
         "Lists are comma-separated (--hdim 64,128). Options take their value as the next\n"
         "argument or after '=' (--iters=50).\n"
         "\n"
         "Options:\n";
  for (const OptionSpec& s : option_specs()) {
    std::string left = std::string("  ") + s.name + (s.value_name ? std::string(" ") + s.value_name : "");
    if (left.size() < kHelpIndent) left.resize(kHelpIndent, ' ');
    else left += "\n" + std::string(kHelpIndent, ' ');
    out << left << wrapped(s.help) << "\n";
  }
  out << "\n"
         "Exit status: 0 every problem ran (and passed --check); 1 a problem failed or its\n"
         "check failed, or no driver / no Hopper GPU; 2 an argument error.\n"
         "Columns and method: docs/bench.md.\n";
  return out.str();
}

ParseResult parse_options(int argc, const char* const* argv) {
  ParseResult result;
  Options& o = result.options;
  try {
    if (cli::apply_arguments(argc, argv, option_specs(), "fa3-bench", false, o, &o.given)) {
      result.exit_now = true;
      result.message = help_text();
      return result;
    }
    if (o.seqlen_q && !o.seqlen_k) o.seqlen_k = o.seqlen_q;
    if (o.seqlen_k && !o.seqlen_q) o.seqlen_q = o.seqlen_k;
    check_combinations(o);
    check_sizes(o);
  } catch (const cli::ArgumentError& e) {
    result.status = 2;
    result.exit_now = true;
    result.message = "fa3-bench: " + e.sentence;
  }
  return result;
}

std::string config_name_error(const std::string& name, const std::vector<std::string>& compiled) {
  if (std::find(compiled.begin(), compiled.end(), name) != compiled.end()) return "";
  return "fa3-bench: --config " + name + " is not a kernel compiled into this fa3 (" +
         std::to_string(compiled.size()) + " are; fa3-bench --list-configs prints them).";
}

}  // namespace fa3bench
