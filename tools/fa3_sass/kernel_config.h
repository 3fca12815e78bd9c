// Which checks a kernel must pass, from what its name (and optionally the tuning table)
// says about its config. Names: fa3_<direction>_<dtype>_d<hdim>_m<bm>_n<bn>_s<stages>
// _w<consumer warpgroups>[_<option>...]; the options are read with the forward kernels' token
// registry (src/kernels/fwd_names.h, header-only: this tool never links libfa3). Tokens it
// does not know are kept and reported, never an error. Backward names are read with their
// own grammar (src/kernels/bwd_config.h); a backward cubin also holds <name>_pre and
// <name>_post, plain kernels that get the no-spill check only.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/bwd_config.h"
#include "kernels/fwd_names.h"

namespace fa3::sass {

// In report order. The names (check_name) are part of the JSON output.
enum class CheckId {
  NoSpills,            // no LDL/STL, no stack or local memory
  SetMaxReg,           // warp-specialized: USETMAXREG dealloc (producer) and alloc (consumers)
  TmaLoads,            // warp-specialized: the producer loads with UTMALDG
  TmaReduceAdd,        // backward main kernel: dQ added into global memory with UBLKRED/UTMAREDG .ADD
  WgmmaUsed,           // matrix kernels: HGMMA/QGMMA, not the warp-level HMMA path
  WgmmaNotSerialized,  // not a wait between every two wgmmas (ptxas C7515-style serialization)
  UniformOperands,     // matrix kernels: no wgmma descriptor computed per thread in the mainloop
  Fp8UsesQgmma,        // fp8 kernels: QGMMA
  TwoStagePipeline,    // _b2 kernels: the paper's Appendix B.2 SASS pattern
  GemmSoftmaxOverlap,  // other pipelined kernels: softmax math runs under an in-flight GEMM
  TmaMulticast,        // cluster kernels: multicast loads, no GPU-scope fence in the mainloop
  HalfBlocks,          // _hb kernels: half-width QK^T and PV groups are compiled in
  BwdGemms,            // backward main kernel: the step loop's wgmmas are the config's 5 GEMMs
  BwdExpOverlap,       // backward main kernel: an eighth of P's exp2 issue under an in-flight GEMM
};
const char* check_name(CheckId id);   // "no_spills", ...
const char* check_title(CheckId id);  // one line for people
std::optional<CheckId> check_from_name(const std::string& name);
const std::vector<CheckId>& all_checks();

// Which kernel of its cubin a function is: a backward call runs <name>_pre, <name>, <name>_post.
enum class KernelRole { Main, Preprocess, Postprocess };
const char* to_string(KernelRole role);  // "main", "pre", "post"

struct KernelTraits {
  bool fa3_name = false;  // "fa3_<direction>_..."
  std::string direction;  // "fwd", "bwd", ...
  std::string dtype;      // "f16", "bf16", "e4m3", ... ("" when the name has none)
  std::optional<int> head_dim, block_m, block_n, stages, consumer_warpgroups;
  // The option fields of the name (loop, row_max, tiles, pingpong, causal, ...), the others at
  // their defaults; its numbers and dtype are the fields above. A name parse_fwd_name accepts
  // gives its whole config; any other gives what its tokens the registry knows spell, in any
  // order (fixture names with extra tokens, fp8 and backward names).
  FwdConfig options;
  bool matrix_kernel = false;     // attention forward/backward: built on wgmma
  bool warp_specialized = false;  // the direction has a producer warpgroup (options.producer
                                  // may still take it away: _nows)
  bool fp8 = false;
  KernelRole role = KernelRole::Main;  // _pre / _post of a backward name
  bool last_first_entry = false;       // a backward kernel's _lf entry (a main loop too)
  // The registers setmaxnreg gives the producer warpgroup (dec) and the consumers (inc), where
  // the config fixes them (backward: BwdConfig::producer_regs / consumer_regs).
  std::optional<int> producer_regs, consumer_regs;
  // Backward: how the consumer warpgroups split dQ_i (bwd_config.h): _dqh head_dim /
  // warpgroups columns, _dqq 64 rows, each over all block_n keys; else all of dQ_i each over
  // its 64 keys.
  DqSplit dq_split = DqSplit::Keys;
  KvSplit kv_split = KvSplit::Keys;
  std::vector<std::string> unknown_tokens;
  std::vector<std::string> notes;  // where a trait came from when not from the name
};

KernelTraits traits_from_name(const std::string& kernel_name);
// The kernel a companion function belongs to: "fa3_bwd_..._w2" for "fa3_bwd_..._w2_pre",
// "_post" and "_lf"; any other name is its own.
std::string main_kernel_name(const std::string& function_name);
// The functions of a kernel's cubin that fa3-sass inspects besides the kernel itself: a
// backward kernel's <name>_pre and <name>_post, and <name>_lf where its config has one
// (BwdConfig::causal_last_first); none for the others.
std::vector<std::string> companion_kernels(const std::string& kernel_name);
// The functions a whole kernel cubin lacks, given the names of the functions it holds: for
// each backward kernel named (by any of its functions), the kernel and its companions. A
// cubin that lacks one was not built by kernels.mk, or the disassembler dropped a function;
// either way a check of what is there would pass a kernel it never saw.
std::vector<std::string> missing_companions(const std::vector<std::string>& function_names);
std::vector<CheckId> checks_for(const KernelTraits& traits);
// "fwd bf16 d128 m128 n128 s2 w2, loop=pipelined, pingpong, causal" (or "not an fa3 kernel
// name").
std::string describe(const KernelTraits& traits);

// The pipelining a tuning table gives a kernel in its entries' "config" objects.
struct TableFlags {
  std::optional<fa3::Loop> loop;  // (fa3::sass::Loop is a loop of SASS)
  std::optional<bool> pingpong;
};
// Reads {"entries": [{"kernel": NAME, "config": {"loop": WORD, "pingpong": b, ...}}, ...]}
// (WORD: a loop value's word in src/kernels/fwd_names.h, e.g. "pipelined"); other keys are
// ignored (the runtime validates the schema, not this tool). On failure returns nullopt and
// sets error to a sentence.
std::optional<std::map<std::string, TableFlags>> read_tuning_table_flags(const std::string& path,
                                                                         std::string& error);
void apply_table_flags(KernelTraits& traits, const TableFlags& flags);

}  // namespace fa3::sass
