// The kernels compiled into the library: their extern "C" names, their cubins (embedded at
// build time) and the configs their names encode.
//
// Forward kernel names are their configs: src/kernels/fwd_names.h holds the grammar (the one
// place each token is defined and explained); this file parses and prints them for the host.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kernels/bwd_config.h"
#include "kernels/fwd_config.h"
#include "kernels/fwd_names.h"

namespace fa3 {

enum class Direction { Forward, Backward };

// The most forward kernels the production set (FWD_PRODUCTION_KERNELS, src/kernels/kernels.mk)
// may hold: the tuning table's picks, the LSE twin of each _ls pick (kernel_for_call) and the
// reference kernels of the paper's ablation, each 2-8 s of one core in every clean build
// (test_registry.cpp enforces it; README, "Build"). 48 kernels built in about two minutes on
// the two-core machine.
constexpr int kProductionForwardBudget = 56;

struct KernelInfo {
  std::string name;
  Direction direction = Direction::Forward;
  FwdConfig fwd;                      // valid when direction == Forward
  BwdConfig bwd;                      // valid when direction == Backward
  const unsigned char* cubin = nullptr;
  size_t cubin_size = 0;
};

// Parses a forward kernel name; nullopt when it does not follow the grammar or names a
// config the kernel code cannot be built with (fwd_config_is_valid). `why`, when given, gets
// the reason.
std::optional<FwdConfig> parse_fwd_kernel_name(const std::string& name, std::string* why = nullptr);
std::string fwd_kernel_name(const FwdConfig& c);

// A name's parts in order, each with what it means: ("bf16", "dtype: bf16"), ("d128", "head
// dimension: 128"), ("ov", "loop: pipelined - Algorithm 2: ..."), ... Options at their
// default (spelled by nothing) are listed too, with an empty spelling. Empty for a name that
// does not parse.
struct NamePart {
  std::string tokens;   // the name's tokens for this part ("" for a default option)
  std::string field;    // the FwdConfig field (dtype, head_dim, ..., loop, tiles, ...)
  std::string value;    // its value in words
  std::string meaning;  // one line
  bool lab_only = false;
};
std::vector<NamePart> explain_fwd_kernel_name(const std::string& name);

// A config field's value in words: the value's word for enums (pipelined, lazy_int_max, ...),
// true/false for flags, the number for cluster_m.
std::string fwd_option_value_word(const FwdConfig& c, const FwdOption& o);

const char* dtype_name(DType d);  // "f16" / "bf16"
// "bf16, head_dim 128, causal": a problem (ForwardProblem, BackwardProblem) in the sentences
// that say no kernel fits it.
template <class Problem>
std::string problem_text(const Problem& p) {
  return std::string(dtype_name(p.dtype)) + ", head_dim " + std::to_string(p.head_dim) +
         (p.causal ? ", causal" : ", not causal");
}

// The registry as markdown: the name's grammar, its numbers, and every option's spellings with
// their `config` values, meanings and lab-only marks. docs/tuning_table.md embeds it and
// `fa3-table tokens --markdown` prints it; a CPU test keeps the two equal.
std::string fwd_tokens_markdown();

// The forward kernels embedded in this library, in name order (what the tuning table, the
// forward calls and the tools that pick among configs see).
const std::vector<KernelInfo>& compiled_kernels();
const KernelInfo* find_compiled_kernel(const std::string& name);
// The backward kernels (fa3_bwd_*), in name order; each cubin also holds <name>_pre and
// <name>_post.
const std::vector<KernelInfo>& compiled_backward_kernels();
// Every embedded kernel, forward then backward (the C API's kernel list, fa3-sass).
const std::vector<const KernelInfo*>& all_compiled_kernels();
const KernelInfo* find_any_compiled_kernel(const std::string& name);
// The same kernels as all_compiled_kernels(), as one list of values (what the tuning table is
// validated against: its entries name kernels of both directions).
const std::vector<KernelInfo>& compiled_forward_and_backward_kernels();

// Parses a backward kernel name (bwd_config.h); nullopt with `why` when it does not parse.
std::optional<BwdConfig> parse_bwd_kernel_name(const std::string& name, std::string* why = nullptr);
std::string bwd_kernel_name(const BwdConfig& c);
// The words of the backward config's splits, as in a tuning table's "bwd" config: "keys",
// "head_dim", "transposed"; "keys", "head_dim", "queries", "head_dim_transposed".
const char* bwd_kv_split_word(KvSplit s);
const char* bwd_dq_split_word(DqSplit s);
// A backward name's parts, as explain_fwd_kernel_name's: the direction, the dtype, the numbers,
// then kv_split, dq_split, rotated_walk, first_store, producer_regs, persistent and causal
// (with an empty spelling at their defaults). Empty for a name that does not parse.
std::vector<NamePart> explain_bwd_kernel_name(const std::string& name);

// A kernel with the row sums by the PV GEMM (FwdConfig::row_sum_mma) serves calls without an
// LSE only: its l sums P~ rounded to 16 bits, and an LSE from it would be off by up to 1e-3.
// A call that asks for the LSE runs its twin, which sums in fp32: the first compiled of the
// same config without row_sum_mma; without it and the integer max (row_max Lazy); without it
// and the lazy row max (Exact). (Without _ls, the d64 three-warpgroup _cr_im kernels make
// ptxas serialize their wgmmas: they are not built, and their _ls twins take the next name.)
// The candidates in that order; empty for a kernel that needs no twin.
std::vector<std::string> fwd_lse_twin_names(const FwdConfig& c);
// The kernel a call runs: `kernel` itself, or (with_lse and row_sum_mma) its first twin
// among `kernels`; nullptr when none of them is there.
const KernelInfo* kernel_for_call(const KernelInfo& kernel, bool with_lse,
                                  const std::vector<KernelInfo>& kernels);

}  // namespace fa3
