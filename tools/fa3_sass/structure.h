// What a kernel's SASS is made of (instruction mix) and how its consumer mainloop is laid
// out: loops, WGMMA groups, where the softmax sits, where the waits are. Facts only; the
// verdicts are in checks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sass_text.h"

namespace fa3::sass {

// One wgmma instruction's shape and operand source, e.g. {"HGMMA", "64x128x16", "RS"}.
struct WgmmaKind {
  std::string opcode;    // HGMMA or QGMMA
  std::string shape;     // MxNxK
  std::string operands;  // "SS": A and B from shared-memory descriptors; "RS": A from registers
  bool operator<(const WgmmaKind& o) const {
    return std::tie(opcode, shape, operands) < std::tie(o.opcode, o.shape, o.operands);
  }
};
WgmmaKind wgmma_kind(const Instruction& in);

struct InstructionMix {
  size_t instructions = 0;
  size_t hgmma = 0, qgmma = 0, warp_mma = 0;
  std::map<WgmmaKind, size_t> wgmma_kinds;
  size_t wgmma_arrive = 0, wgmma_wait = 0;
  size_t mufu_ex2 = 0, f2fp = 0, fmnmx = 0, shfl_bfly = 0;
  size_t bar_sync = 0, bar_arv = 0, syncs = 0;
  size_t utmaldg = 0, utmastg = 0;
  size_t utmaldg_multicast = 0;  // UTMALDG.*.MULTICAST: one load into several CTAs of a cluster
  size_t utmaredg = 0;           // UTMAREDG: TMA reduce into global memory (cp.reduce.async.bulk.tensor)
  size_t utmaredg_add = 0;       // of those, UTMAREDG.*.ADD (.add)
  size_t ublkred = 0;            // UBLKRED: bulk reduce into global memory (cp.reduce.async.bulk)
  size_t ublkred_add = 0;        // of those, .ADD
  // RED/REDG/ATOM/ATOMG adds of floating-point values (.F32, .F16x2, .BF16x2, .F64): per-thread
  // atomics into global memory, the path the backward's dQ must not take.
  size_t float_atomic_adds = 0;
  size_t usetmaxreg_dealloc = 0, usetmaxreg_alloc = 0;
  // The register counts they set (their immediate), in program order; none when not an immediate.
  std::vector<int> usetmaxreg_dealloc_regs, usetmaxreg_alloc_regs;
  size_t ldl = 0, stl = 0;
};
InstructionMix count_mix(const SassFunction& f);

// A backward branch and the instructions it repeats: [first, last] (last = the branch).
struct Loop {
  size_t first = 0, last = 0;
  size_t wgmma = 0;     // wgmma instructions inside
  size_t warp_mma = 0;  // HMMA/IMMA inside
  // A forward branch inside jumps over wgmma instructions to a point inside: an iteration
  // runs one of several bodies (e.g. _hb's half-width or full-width step), so `wgmma` counts
  // more than one iteration issues.
  bool alternative_bodies = false;
  // Strictly contains: a loop does not contain itself.
  bool contains(const Loop& o) const {
    return first <= o.first && o.last <= last && (first != o.first || last != o.last);
  }
  size_t size() const { return last - first + 1; }
};
std::vector<Loop> find_loops(const SassFunction& f);

// A run of wgmma instructions ending at the one that carries gsb0 (one commit group).
struct WgmmaGroup {
  size_t first = 0, last = 0;  // indices of its first and last wgmma
  size_t wgmma = 0;
  std::map<WgmmaKind, size_t> kinds;
  size_t between = 0;          // non-wgmma instructions between first and last
  size_t between_softmax = 0;  // of those, softmax work (E C M S + *)
  bool committed = true;       // false when the range ended before a gsb0
  // Softmax work issued after this group's first HGMMA and before the wait that retires it:
  // what actually overlaps its tensor-core work, however the instructions are arranged.
  size_t softmax_in_flight = 0;
  size_t softmax_math_in_flight = 0;  // of those, the row max and exp2 (FMNMX, MUFU.EX2)
  size_t exp2_in_flight = 0;          // of those, MUFU.EX2 alone (bwd_exp_overlap's count)
  std::optional<size_t> retired_at;  // index of that wait; nullopt when not inside the range
  // Interleaved: softmax work runs while this group's HGMMAs issue (paper B.2's first WGMMA).
  bool interleaved() const { return between_softmax > 0; }
  std::string kind_summary() const;  // "8 x HGMMA.64x128x16 SS"
};
std::vector<WgmmaGroup> find_groups(const SassFunction& f, size_t first, size_t last);

struct WgmmaWaitSite {
  size_t index = 0;
  int pending = 0;  // N of WARPGROUP.DEPBAR.LE gsb0, N
};

enum class SoftmaxPosition { None, Before, Inside, After };
const char* to_string(SoftmaxPosition p);

// The consumer mainloop: the innermost loop holding the most wgmma instructions (ties: the
// shorter one, i.e. the steady-state loop rather than a masking one). A kernel without wgmma
// gets the loop with the most HMMA instead, so its picture still shows where the math is.
struct Mainloop {
  Loop loop;
  uint32_t first_address = 0, last_address = 0;  // of loop.first and loop.last
  std::vector<WgmmaGroup> groups;
  std::vector<WgmmaWaitSite> waits;
  std::optional<size_t> softmax_start;                       // first FMNMX or MUFU.EX2 in the loop
  size_t exp2 = 0;                                           // MUFU.EX2 in the loop
  SoftmaxPosition softmax_position = SoftmaxPosition::None;  // relative to the first group
  size_t membar_gpu = 0;  // MEMBAR of GPU or system scope in the loop (a wide release)
  // R2URs that move into a wgmma descriptor register what an instruction of this loop
  // computed (per thread) before them: descriptors built in vector registers every
  // iteration, from a value ptxas did not prove warp-uniform (the persistent kernels' K/V
  // stage index carried around the tile loop; measured on an H100: broadcasting it from lane 0
  // made the persistent d128 kernel 3-15% faster).
  size_t r2ur_of_loop_values = 0;
  std::optional<size_t> first_r2ur_of_loop_value;  // its index
  // R2URs that move a descriptor back from a vector register the loop parked it in (MOV R,
  // UR): still warp-uniform, only out of uniform registers (the _p2 loops, where ptxas runs
  // out of its 63 uniform registers). A MOV and an R2UR each, not per-thread math: reported,
  // not failed.
  size_t r2ur_of_parked_values = 0;
  std::string picture;
};
std::optional<Mainloop> find_mainloop(const SassFunction& f);

// Consecutive wgmma pairs of [first, last] and how many of them a wait separates; every
// pair separated means ptxas serialized the wgmmas (it does so per function, warning C7515).
struct Serialization {
  size_t pairs = 0;
  size_t separated = 0;
  bool serialized() const { return pairs > 0 && separated == pairs; }
};
Serialization measure_serialization(const SassFunction& f, size_t first, size_t last);
Serialization measure_serialization(const SassFunction& f);  // the whole function

}  // namespace fa3::sass
