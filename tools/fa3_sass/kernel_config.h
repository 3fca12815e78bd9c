// Which checks a kernel must pass, from what its name (and optionally the tuning table)
// says about its config. Kernel names: fa3_<direction>_<dtype>_d<hdim>_m<bm>_n<bn>_s<stages>
// _w<consumer warpgroups>[_causal][_ov][_pp] (src/runtime/kernel_registry.h); tokens this
// tool does not know are kept and reported, never an error.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fa3::sass {

// In report order. The names (check_name) are part of the JSON output.
enum class CheckId {
  NoSpills,            // no LDL/STL, no stack or local memory
  SetMaxReg,           // warp-specialized: USETMAXREG dealloc (producer) and alloc (consumers)
  TmaLoads,            // warp-specialized: the producer loads with UTMALDG
  WgmmaUsed,           // matrix kernels: HGMMA/QGMMA, not the warp-level HMMA path
  WgmmaNotSerialized,  // not a wait between every two wgmmas (ptxas C7515-style serialization)
  UniformOperands,     // matrix kernels: no wgmma descriptor computed per thread in the mainloop
  Fp8UsesQgmma,        // fp8 kernels: QGMMA
  TwoStagePipeline,    // _b2 kernels: the paper's Appendix B.2 SASS pattern
  GemmSoftmaxOverlap,  // other pipelined kernels: softmax math runs under an in-flight GEMM
  TmaMulticast,        // cluster kernels: multicast loads, no GPU-scope fence in the mainloop
  HalfBlocks,          // _hb kernels: half-width QK^T and PV groups are compiled in
};
const char* check_name(CheckId id);   // "no_spills", ...
const char* check_title(CheckId id);  // one line for people
std::optional<CheckId> check_from_name(const std::string& name);
const std::vector<CheckId>& all_checks();

struct KernelTraits {
  bool fa3_name = false;  // "fa3_<direction>_..."
  std::string direction;  // "fwd", "bwd", ...
  std::string dtype;      // "f16", "bf16", "e4m3", ... ("" when the name has none)
  std::optional<int> head_dim, block_m, block_n, stages, consumer_warpgroups;
  bool causal = false;
  bool overlap = false;           // intra-warpgroup 2-stage GEMM-softmax pipelining (paper 3.2)
  bool pingpong = false;          // inter-warpgroup pingpong scheduling (paper 3.1)
  bool three_stage = false;       // _ov3: 3-stage pipelining (paper Algorithm 4), not B.2's
  bool double_p = false;          // _p2: two P register buffers
  bool b2_order = false;          // _b2: the 2-stage loop in the order of B.2's SASS
  bool conditional_rescale = false;  // _cr: lazy row max, O rescaled only when it grows
  bool int_max = false;              // _im: the row max by a 3-input integer max
  bool exp_after_pv_wait = false;  // _ew: a step's exponentials after its PV-GEMM wait
  bool ascending = false;         // _as: key blocks visited first to last
  bool persistent = false;        // _ps: persistent grid
  bool cross_tile = false;        // _xt: a tile's last PV and epilogue overlap the next tile
  bool q_warp = false;            // _qw: Q loaded by a producer warp of its own
  bool three_q_buffers = false;   // _q3: three Q buffers, each released a tile after its store
  bool q_warp_stores_o = false;   // _os: the Q warp stores O
  bool dynamic_schedule = false;  // _dy: non-causal tiles handed out through a counter
  bool q_in_registers = false;    // _qr: QK^T with Q from registers (RS-wgmma)
  bool evict_first_q_o = false;   // _ef: Q loads and O stores evict-first in L2
  bool evict_last_kv = false;     // _el: K and V loads evict-last in L2
  bool half_blocks = false;       // _hb: upper-half-masked blocks at half width
  bool row_sum_mma = false;       // _ls: the PV GEMM 8 columns wider, for the row sums
  bool cluster = false;           // _c2: 2-CTA clusters, K/V loaded by TMA multicast
  bool no_warp_specialization = false;  // _nows: no producer warpgroup, no setmaxnreg
  bool matrix_kernel = false;     // attention forward/backward: built on wgmma
  bool warp_specialized = false;  // producer warpgroup + setmaxnreg
  bool fp8 = false;
  std::vector<std::string> unknown_tokens;
  std::vector<std::string> notes;  // where a trait came from when not from the name
};

KernelTraits traits_from_name(const std::string& kernel_name);
std::vector<CheckId> checks_for(const KernelTraits& traits);
// "bf16 d128 m128 n128 s2 w2, causal, overlap" (or "not an fa3 kernel name").
std::string describe(const KernelTraits& traits);

// The pipelining flags a tuning table gives a kernel in its entries' "config" objects.
struct TableFlags {
  std::optional<bool> overlap, pingpong, b2_order, three_stage;
};
// Reads {"entries": [{"kernel": NAME, "config": {"overlap": b, "pingpong": b, ...}}, ...]};
// other keys are ignored (the runtime validates the schema, not this tool). On failure
// returns nullopt and sets error to a sentence.
std::optional<std::map<std::string, TableFlags>> read_tuning_table_flags(const std::string& path,
                                                                         std::string& error);
void apply_table_flags(KernelTraits& traits, const TableFlags& flags);

}  // namespace fa3::sass
