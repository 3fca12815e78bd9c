#include "analysis.h"

#include <algorithm>
#include <map>
#include <optional>

namespace fa3::sass {

namespace {

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Opcodes stay as the disassembler spells them: "3 UTMALDG".
std::string count(size_t n, const std::string& opcode) { return std::to_string(n) + " " + opcode; }

std::string offset(size_t index, const Mainloop& m) { return "+" + std::to_string(index - m.loop.first); }

CheckResult no_spills(const KernelReport& k) {
  const ResourceUsage& r = k.resources;
  std::vector<std::string> problems;
  if (k.mix.ldl + k.mix.stl > 0)
    problems.push_back(std::to_string(k.mix.ldl) + " LDL and " + std::to_string(k.mix.stl) + " STL");
  if (r.stack_bytes.value_or(0) > 0)
    problems.push_back("a " + std::to_string(*r.stack_bytes) + "-byte stack frame");
  if (r.local_bytes.value_or(0) > 0)
    problems.push_back(std::to_string(*r.local_bytes) + " bytes of local memory");
  if (problems.empty()) {
    std::string detail = "no LDL/STL";
    detail += r.stack_bytes ? ", stack " + std::to_string(*r.stack_bytes) : ", stack unknown";
    detail += r.local_bytes ? ", local " + std::to_string(*r.local_bytes) : ", local unknown";
    return {CheckId::NoSpills, true, detail};
  }
  std::string detail;
  for (const std::string& p : problems) detail += (detail.empty() ? "" : ", ") + p;
  return {CheckId::NoSpills, false, detail + ": registers spill to local memory (see ptxas -v)"};
}

// "24" or "24, 32": the register counts one kind of USETMAXREG sets.
std::string register_counts(const std::vector<int>& regs) {
  std::vector<int> unique = regs;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  std::string s;
  for (int r : unique) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s.empty() ? "?" : s;
}

// Every count of `regs` is `expected` (and there is one).
bool all_equal(const std::vector<int>& regs, int expected) {
  return !regs.empty() && std::all_of(regs.begin(), regs.end(), [&](int r) { return r == expected; });
}

CheckResult setmaxreg(const KernelReport& k) {
  const size_t dealloc = k.mix.usetmaxreg_dealloc, alloc = k.mix.usetmaxreg_alloc;
  const std::string counts = std::to_string(dealloc) + " DEALLOC, " + std::to_string(alloc) + " TRY_ALLOC";
  const std::optional<int> producer = k.traits.producer_regs, consumer = k.traits.consumer_regs;
  if (dealloc > 0 && alloc > 0 && producer && consumer) {
    // The config fixes the split (the backward kernel): the immediates must be its counts.
    const std::string set = "USETMAXREG: " + std::to_string(dealloc) + " DEALLOC to " +
                            register_counts(k.mix.usetmaxreg_dealloc_regs) + ", " + std::to_string(alloc) +
                            " TRY_ALLOC to " + register_counts(k.mix.usetmaxreg_alloc_regs);
    const std::string wanted =
        "the config's " + std::to_string(*producer) + " (producer) / " + std::to_string(*consumer) + " (consumers)";
    if (all_equal(k.mix.usetmaxreg_dealloc_regs, *producer) && all_equal(k.mix.usetmaxreg_alloc_regs, *consumer))
      return {CheckId::SetMaxReg, true, set + ", " + wanted};
    return {CheckId::SetMaxReg, false, set + ": not " + wanted};
  }
  if (dealloc > 0 && alloc > 0) return {CheckId::SetMaxReg, true, "USETMAXREG: " + counts};
  if (dealloc + alloc == 0)
    return {CheckId::SetMaxReg, false,
            "no USETMAXREG: setmaxnreg is missing or ptxas dropped it (warning C7508; needs "
            "__launch_bounds__(threads, 1)), so consumers keep the launch's register count"};
  return {
      CheckId::SetMaxReg, false,
      "USETMAXREG: " + counts + ": the register split is one-sided (producer must dealloc, consumers alloc)"};
}

CheckResult tma_loads(const KernelReport& k) {
  if (k.mix.utmaldg > 0) return {CheckId::TmaLoads, true, count(k.mix.utmaldg, "UTMALDG")};
  return {CheckId::TmaLoads, false, "no UTMALDG: the producer does not load tiles with TMA"};
}

// The backward kernel's dQ writer adds each step's dQ parts into the fp32 accumulator with
// the TMA unit's bulk reduce-adds: cp.reduce.async.bulk.*.add (SASS UBLKRED ... .ADD, the
// plain form the kernels use) or its tensor form (UTMAREDG.4D.ADD). Without either, dQ is
// summed some other way (per-thread atomics: RED/ATOM, slower and not deterministic).
// Per-thread floating-point atomics beside them fail the check too: part of dQ (or of
// anything) would then be summed in an order that changes from run to run.
CheckResult tma_reduce_add(const KernelReport& k) {
  const CheckId id = CheckId::TmaReduceAdd;
  const size_t atomics = k.mix.float_atomic_adds;
  const std::string atomic_adds = plural(atomics, "per-thread floating-point atomic add") + " (RED/ATOM)";
  std::string bulk;
  if (k.mix.ublkred_add > 0) bulk = count(k.mix.ublkred_add, "UBLKRED .ADD");
  else if (k.mix.utmaredg_add > 0) bulk = count(k.mix.utmaredg_add, "UTMAREDG.ADD");
  if (!bulk.empty() && atomics == 0) return {id, true, bulk};
  if (!bulk.empty())
    return {id, false, bulk + ", but also " + atomic_adds + ": not every sum goes through the TMA unit"};
  const std::string also = atomics > 0 ? "; " + atomic_adds + " instead" : "";
  if (k.mix.utmaredg + k.mix.ublkred > 0)
    return {id, false, count(k.mix.utmaredg + k.mix.ublkred, "UTMAREDG/UBLKRED") +
                           ", none of them .ADD: dQ is not accumulated" + also};
  return {id, false, "no UTMAREDG or UBLKRED: dQ is not added into global memory by TMA reduce-adds" + also};
}

// A cluster kernel shares its K/V loads through multicast, and its consumers hand stages
// back to the other CTA with remote mbarrier arrivals. Those must not carry a cluster-scope
// release: ptxas puts a MEMBAR.ALL.GPU before each (it halved the speed of the first build).
CheckResult tma_multicast(const KernelReport& k) {
  const CheckId id = CheckId::TmaMulticast;
  if (k.mix.utmaldg_multicast == 0)
    return {id, false, "no UTMALDG.MULTICAST: the CTAs of a cluster load K/V separately"};
  const std::string loads = count(k.mix.utmaldg_multicast, "UTMALDG.MULTICAST");
  if (!k.mainloop) return {id, false, loads + ", but no mainloop found to check for fences"};
  if (k.mainloop->membar_gpu > 0)
    return {id, false,
            loads + ", but " + count(k.mainloop->membar_gpu, "GPU-scope MEMBAR") +
                " in the mainloop: a release wider than the CTA on the stage hand-back"};
  return {id, true, loads + ", no GPU-scope MEMBAR in the mainloop"};
}

CheckResult wgmma_used(const KernelReport& k) {
  const size_t wgmma = k.mix.hgmma + k.mix.qgmma;
  if (wgmma > 0)
    return {CheckId::WgmmaUsed, true,
            std::to_string(k.mix.hgmma) + " HGMMA, " + std::to_string(k.mix.qgmma) + " QGMMA"};
  if (k.mix.warp_mma > 0)
    return {CheckId::WgmmaUsed, false,
            "no HGMMA/QGMMA but " + count(k.mix.warp_mma, "HMMA/IMMA") +
                ": the GEMMs run on warp-level mma.sync, not Hopper wgmma (built without sm_90a?)"};
  return {CheckId::WgmmaUsed, false, "no HGMMA/QGMMA and no HMMA: no tensor-core instruction at all"};
}

CheckResult wgmma_not_serialized(const KernelReport& k) {
  const CheckId id = CheckId::WgmmaNotSerialized;
  const Serialization& all = k.serialization;
  const Serialization& loop = k.mainloop_serialization;
  // No wgmma is not "nothing serialized": the check cannot be made, so it does not pass.
  if (k.mix.hgmma + k.mix.qgmma == 0) return {id, false, "no wgmma: there is no overlap of wgmmas to see"};
  if (all.pairs == 0) return {id, true, "one wgmma: nothing to serialize"};
  if (all.serialized())
    return {id, false,
            "a wait or fence separates all " + std::to_string(all.pairs) +
                " consecutive wgmma pairs: ptxas serialized wgmma (look for C7515/C7510 in the ptxas log)"};
  if (loop.serialized())
    return {id, false,
            "a wait or fence separates all " + std::to_string(loop.pairs) +
                " consecutive wgmma pairs of the mainloop: no two of its wgmmas overlap"};
  return {id, true,
          std::to_string(all.separated) + " of " + std::to_string(all.pairs) +
              " consecutive wgmma pairs separated by a wait (group boundaries)"};
}

CheckResult fp8_uses_qgmma(const KernelReport& k) {
  if (k.mix.qgmma > 0) {
    std::string detail = count(k.mix.qgmma, "QGMMA");
    if (k.mix.hgmma > 0) detail += " (and " + count(k.mix.hgmma, "HGMMA") + ")";
    return {CheckId::Fp8UsesQgmma, true, detail};
  }
  return {CheckId::Fp8UsesQgmma, false,
          "no QGMMA (" + count(k.mix.hgmma, "HGMMA") + "): the fp8 kernel does not multiply in fp8"};
}

// The pipelined checks look at a mainloop of two WGMMA groups: the failure when there is none
// (`needs` names what needs the two groups).
std::optional<CheckResult> no_two_groups(const KernelReport& k, CheckId id, const char* needs) {
  if (!k.mainloop || k.mainloop->loop.wgmma == 0)
    return CheckResult{id, false, "no loop holds a wgmma: the consumer mainloop was not found"};
  const size_t groups = k.mainloop->groups.size();
  if (groups < 2)
    return CheckResult{id, false,
                       "the mainloop has " + plural(groups, "WGMMA group") + "; " + needs + " needs 2"};
  return std::nullopt;
}

// The first full wait (DEPBAR.LE gsb0, 0x0) after WGMMA 1 and before WGMMA 2: WGMMA 1 is
// drained before WGMMA 2 issues, so the two GEMMs never overlap.
std::optional<std::string> drain_between_groups(const Mainloop& m) {
  for (const WgmmaWaitSite& w : m.waits)
    if (w.index > m.groups[0].last && w.index < m.groups[1].first && w.pending == 0)
      return "a full wait (DEPBAR.LE gsb0, 0x0) at " + offset(w.index, m) +
             " drains WGMMA 1 before WGMMA 2 issues";
  return std::nullopt;
}

// Paper Appendix B.2: softmax reordered before the first WGMMA, the first WGMMA's HGMMAs
// interleaved with softmax work, the second WGMMA's HGMMAs packed, and the first WGMMA still
// in flight when the second issues (one wait at the end).
CheckResult two_stage_pipeline(const KernelReport& k) {
  const CheckId id = CheckId::TwoStagePipeline;
  if (auto failure = no_two_groups(k, id, "the 2-stage pipeline")) return *failure;
  const Mainloop& m = *k.mainloop;
  const WgmmaGroup& first = m.groups[0];
  const WgmmaGroup& second = m.groups[1];
  std::vector<std::string> failures, evidence;

  if (m.softmax_position == SoftmaxPosition::Before)
    evidence.push_back("softmax starts at " + offset(*m.softmax_start, m) + ", before WGMMA 1 (" +
                       offset(first.first, m) + ")");
  else if (m.softmax_start)
    failures.push_back(std::string("softmax starts ") + to_string(m.softmax_position) + " WGMMA 1 (" +
                       offset(*m.softmax_start, m) + " vs " + offset(first.first, m) + "), not before it");
  else
    failures.push_back("no FMNMX or MUFU.EX2 in the mainloop: no softmax to overlap");

  if (first.interleaved())
    evidence.push_back("WGMMA 1 interleaved with " + std::to_string(first.between_softmax) +
                       " softmax instructions");
  else
    failures.push_back("WGMMA 1 is packed (no softmax work between its HGMMAs)");

  if (!second.interleaved())
    evidence.push_back("WGMMA 2 packed");
  else
    failures.push_back("WGMMA 2 is interleaved with " + std::to_string(second.between_softmax) +
                       " softmax instructions (expected packed)");

  if (auto drain = drain_between_groups(m)) failures.push_back(*drain);
  else evidence.push_back("WGMMA 1 still in flight when WGMMA 2 issues");

  auto join = [](const std::vector<std::string>& parts) {
    std::string s;
    for (const std::string& p : parts) s += (s.empty() ? "" : "; ") + p;
    return s;
  };
  if (failures.empty()) return {id, true, join(evidence)};
  return {id, false, join(failures)};
}

// Paper Algorithm 2 (and 4), however ptxas arranged it: the softmax's row max or exp2 executes
// while a WGMMA group of the mainloop is still in flight, and the two GEMMs are not drained
// in between (no full wait between WGMMA 1 and WGMMA 2).
CheckResult gemm_softmax_overlap(const KernelReport& k) {
  const CheckId id = CheckId::GemmSoftmaxOverlap;
  if (auto failure = no_two_groups(k, id, "pipelining")) return *failure;
  const Mainloop& m = *k.mainloop;
  if (auto drain = drain_between_groups(m)) return {id, false, *drain};
  std::string evidence;
  size_t best = 0;
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const WgmmaGroup& group = m.groups[g];
    if (group.softmax_math_in_flight == 0) continue;
    best = std::max(best, group.softmax_math_in_flight);
    evidence += (evidence.empty() ? "" : "; ") + std::to_string(group.softmax_math_in_flight) +
                " row-max/exp2 (" + std::to_string(group.softmax_in_flight) +
                " softmax) instructions while WGMMA " + std::to_string(g + 1) + " is in flight";
  }
  if (best == 0)
    return {id, false,
            "no FMNMX or MUFU.EX2 issues while a WGMMA group is in flight: every GEMM is waited "
            "for before the softmax that follows it (nothing overlaps inside the warpgroup)"};
  return {id, true, evidence};
}

// wgmma reads its descriptors from uniform registers. A descriptor that depends on a value
// ptxas did not prove warp-uniform is computed in vector registers and moved over with R2UR
// every iteration: the persistent kernels' K/V stage index carried around the tile loop made
// each key block 3-7% longer that way (measured on an H100). R2URs of values computed before the loop (d256's Q
// descriptors, kept in vector registers) are fine, and so are uniform values parked in vector
// registers and moved back (MOV R, UR ... R2UR): ptxas out of uniform registers, not
// per-thread math.
CheckResult uniform_operands(const KernelReport& k) {
  const CheckId id = CheckId::UniformOperands;
  if (!k.mainloop || k.mainloop->loop.wgmma + k.mainloop->loop.warp_mma == 0)
    return {id, false, "no loop holds a wgmma: the consumer mainloop was not found"};
  const Mainloop& m = *k.mainloop;
  if (m.r2ur_of_loop_values == 0)
    return {id, true,
            "no wgmma descriptor of the mainloop is moved in from a value it computes per thread" +
                (m.r2ur_of_parked_values == 0
                     ? std::string()
                     : "; " + count(m.r2ur_of_parked_values, "R2UR") +
                           " move back descriptors parked in vector registers (uniform "
                           "registers ran out)")};
  return {id, false,
          count(m.r2ur_of_loop_values, "R2UR") + " in the mainloop (first at " +
              offset(*m.first_r2ur_of_loop_value, m) +
              ") move wgmma descriptors the loop computes per thread: they are rebuilt in vector "
              "registers every iteration; make what they depend on warp-uniform (e.g. "
              "__shfl_sync from lane 0)"};
}

// FwdConfig::half_blocks: a block whose upper half is masked for a warpgroup is computed at
// half width. The kernel must hold both half forms: a QK^T group whose HGMMAs are N = block_n/2
// wide (SS, or RS with _qr), and a PV group of block_n/32 RS HGMMAs (k-steps of 16 keys) of
// the PV shape (N = head_dim, + 8 with the row sums by the PV GEMM, _ls). Were the half path
// never compiled (the predicate folded to false, say), the results would stay right and only
// the time would tell.
CheckResult half_blocks(const KernelReport& k) {
  const CheckId id = CheckId::HalfBlocks;
  if (!k.traits.block_n || *k.traits.block_n % 32 != 0)
    return {id, false, "the name gives no block_n that halves into whole k-steps"};
  if (!k.traits.head_dim) return {id, false, "the name gives no head_dim"};
  const std::string half_shape = "64x" + std::to_string(*k.traits.block_n / 2) + "x16";
  const std::string pv_shape =
      "64x" + std::to_string(*k.traits.head_dim + (k.traits.options.row_sum_mma ? 8 : 0)) + "x16";
  const std::string qk_operands = k.traits.options.q_in_registers ? "RS" : "SS";
  const size_t half_steps = static_cast<size_t>(*k.traits.block_n / 32);
  size_t qk = 0, pv = 0;
  for (const WgmmaGroup& g : k.groups) {
    bool qk_half = !g.kinds.empty(), pv_rs = !g.kinds.empty();
    for (const auto& [kind, n] : g.kinds) {
      qk_half = qk_half && kind.operands == qk_operands && kind.shape == half_shape;
      pv_rs = pv_rs && kind.operands == "RS" && kind.shape == pv_shape;
    }
    if (qk_half) ++qk;
    if (pv_rs && g.wgmma == half_steps) ++pv;
  }
  const std::string found = plural(qk, "QK^T group") + " of HGMMA." + half_shape + " " +
                            qk_operands + ", " + plural(pv, "PV group") + " of " +
                            std::to_string(half_steps) + " RS HGMMA." + pv_shape;
  if (qk > 0 && pv > 0) return {id, true, found};
  return {id, false, found + ": the half-width path of _hb is not in the kernel"};
}

// Paper Algorithm 3 as src/kernels/bwd_kernel.cuh writes it, per consumer warpgroup (64 keys)
// and query block (block_m rows) of the step loop:
//   S^T = K_j Q_i^T and dP^T = V_j dO_i^T  SS, HGMMA.64x{block_m}x16, head_dim/16 k-steps each
//   dV += P^T dO_i and dK += dS^T Q_i      RS, HGMMA.64x{head_dim}x16, block_m/16 k-steps each
//   dQ_i part = dS K_j                     SS, HGMMA.64x{head_dim}x16, 64/16 = 4 k-steps
//     (_dqh: HGMMA.64x{head_dim / warpgroups}x16, _dqq: HGMMA.64x{head_dim}x16, _dqt's
//     dQ_i^T = K_j^T dS^T: HGMMA.64x{block_m}x16, block_n/16 k-steps)
// _kvh (the warpgroups share the keys and split the queries of S^T and the head dim of dK,
// dV and dQ): S^T, dP^T SS HGMMA.64x{block_m / warpgroups}x16; dV, dK SS (P^T and dS^T from
// shared memory) and dQ SS, all HGMMA.64x{head_dim / warpgroups}x16, block_m/16 and
// block_n/16 k-steps.
// _kvt (as _kvh, dK and dV transposed): S, dP SS HGMMA.64x{block_n / warpgroups}x16,
// head_dim/16 k-steps each; dV^T, dK^T SS HGMMA.64x{block_n}x16, block_m/16 k-steps for each
// of the head_dim / warpgroups / 64 M blocks; dQ SS HGMMA.64x64x16, block_n/16 k-steps for
// each of its head_dim / warpgroups / 64 pieces.
// The mainloop (the innermost loop with the most wgmma) must hold exactly these, once per
// iteration (or a whole multiple, were ptxas to unroll it).
CheckResult match_bwd_gemms(const KernelReport& k, const std::map<WgmmaKind, size_t>& expected,
                            const std::string& gemms);

CheckResult bwd_gemms(const KernelReport& k) {
  const CheckId id = CheckId::BwdGemms;
  if (!k.traits.head_dim || !k.traits.block_m)
    return {id, false, "the name gives no head_dim and block_m: nothing to expect"};
  const int d = *k.traits.head_dim, bm = *k.traits.block_m;
  if (d % 16 != 0 || bm % 16 != 0 || d <= 0 || bm <= 0)
    return {id, false, "head_dim and block_m must be multiples of 16"};
  const std::string opcode = k.traits.fp8 ? "QGMMA" : "HGMMA";
  const std::string s_shape = "64x" + std::to_string(bm) + "x16", d_shape = "64x" + std::to_string(d) + "x16";
  std::map<WgmmaKind, size_t> expected;
  if (k.traits.kv_split == KvSplit::Transposed) {
    const int w = k.traits.consumer_warpgroups ? *k.traits.consumer_warpgroups : 0;
    if (w <= 0 || !k.traits.block_n || d % (64 * w) != 0)
      return {id, false, "a _kvt name gives its warpgroups, block_n and 64-column blocks"};
    const int bn = *k.traits.block_n, blocks = d / w / 64;
    expected[WgmmaKind{opcode, "64x" + std::to_string(bn / w) + "x16", "SS"}] +=
        2 * static_cast<size_t>(d / 16);  // S, dP
    expected[WgmmaKind{opcode, "64x" + std::to_string(bn) + "x16", "SS"}] +=
        2 * static_cast<size_t>(blocks * bm / 16);  // dV^T, dK^T
    expected[WgmmaKind{opcode, "64x64x16", "SS"}] += static_cast<size_t>(blocks * bn / 16);  // dQ
    return match_bwd_gemms(k, expected,
                           "(S, dP: 2 x " + std::to_string(d / 16) + " SS; dV^T, dK^T: 2 x " +
                               std::to_string(blocks * bm / 16) + " SS; dQ: " +
                               std::to_string(blocks * bn / 16) + " SS)");
  }
  if (k.traits.kv_split == KvSplit::HeadDim) {
    const int w = k.traits.consumer_warpgroups ? *k.traits.consumer_warpgroups : 0;
    if (w <= 0 || !k.traits.block_n) return {id, false, "a _kvh name gives its warpgroups and block_n"};
    const std::string half_s = "64x" + std::to_string(bm / w) + "x16",
                      half_d = "64x" + std::to_string(d / w) + "x16";
    expected[WgmmaKind{opcode, half_s, "SS"}] += 2 * static_cast<size_t>(d / 16);  // S^T, dP^T
    expected[WgmmaKind{opcode, half_d, "SS"}] +=
        2 * static_cast<size_t>(bm / 16) + static_cast<size_t>(*k.traits.block_n / 16);  // dV, dK, dQ
    return match_bwd_gemms(k, expected,
                           "(S^T, dP^T: 2 x " + std::to_string(d / 16) + " SS; dV, dK: 2 x " +
                               std::to_string(bm / 16) + " SS; dQ: " +
                               std::to_string(*k.traits.block_n / 16) + " SS)");
  }
  expected[WgmmaKind{opcode, s_shape, "SS"}] += 2 * static_cast<size_t>(d / 16);  // S^T, dP^T
  expected[WgmmaKind{opcode, d_shape, "RS"}] += 2 * static_cast<size_t>(bm / 16);  // dV, dK
  const bool all_keys = k.traits.dq_split != DqSplit::Keys && k.traits.block_n &&
                        k.traits.consumer_warpgroups && *k.traits.consumer_warpgroups > 0;
  // _dqt computes dQ^T = K_j^T dS^T: its 64 head-dim rows x block_m queries (N).
  const int dq_cols = !all_keys                                   ? d
                      : k.traits.dq_split == DqSplit::HeadDim    ? d / *k.traits.consumer_warpgroups
                      : k.traits.dq_split == DqSplit::HeadDimT   ? bm
                                                                 : d;
  const int dq_steps = all_keys ? *k.traits.block_n / 16 : 64 / 16;
  expected[WgmmaKind{opcode, "64x" + std::to_string(dq_cols) + "x16", "SS"}] += static_cast<size_t>(dq_steps);  // dQ
  return match_bwd_gemms(k, expected,
                         "(S^T, dP^T: 2 x " + std::to_string(d / 16) + " SS; dV, dK: 2 x " +
                             std::to_string(bm / 16) + " RS; dQ: " + std::to_string(dq_steps) + " SS)");
}

// Whether the mainloop of k holds exactly `expected` per step (a whole number of steps).
CheckResult match_bwd_gemms(const KernelReport& k, const std::map<WgmmaKind, size_t>& expected,
                            const std::string& gemms) {
  const CheckId id = CheckId::BwdGemms;
  size_t per_step = 0;
  for (const auto& [kind, n] : expected) per_step += n;
  auto summary = [](const std::map<WgmmaKind, size_t>& kinds) {
    std::string s;
    for (const auto& [kind, n] : kinds)
      s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + kind.opcode + "." + kind.shape + " " + kind.operands;
    return s.empty() ? std::string("none") : s;
  };
  const std::string wanted = "per step " + summary(expected) + " " + gemms;
  if (!k.mainloop || k.mainloop->loop.wgmma == 0)
    return {id, false, "no loop holds a wgmma: the step loop was not found; expected " + wanted};
  std::map<WgmmaKind, size_t> found;
  for (const WgmmaGroup& g : k.mainloop->groups)
    for (const auto& [kind, n] : g.kinds) found[kind] += n;
  const size_t total = k.mainloop->loop.wgmma;
  const size_t steps = total / per_step;
  bool matches = total % per_step == 0 && steps > 0 && found.size() == expected.size();
  for (const auto& [kind, n] : expected) {
    const auto it = found.find(kind);
    matches = matches && it != found.end() && it->second == n * steps;
  }
  const std::string seen = "the mainloop holds " + summary(found) + " in " +
                           plural(k.mainloop->groups.size(), "group");
  if (matches)
    return {id, true,
            seen + (steps == 1 ? std::string(": one step") : ": " + std::to_string(steps) + " steps") +
                " of " + std::to_string(per_step) + ", as the config gives"};
  return {id, false, seen + "; expected " + wanted + ": a GEMM is missing, split or of another shape"};
}

// The backward's overlap inside a warpgroup: P's exponentials (Algorithm 3, line 19) issue
// while dP's GEMM (line 21), issued right after S's, runs on the tensor cores. Where they go is
// ptxas's choice: the production kernels have about half or more of them there (d64 37-41 of
// 64, d128 17-23 of 32-40), d256's `_kvt` 5-6 of 20 (ptxas 13.0, the SASS disassembled on an
// H100), while the lab's d64 non-causal persistent kernel got 2 of 64 and ran 3-8% slower
// than its one-tile twin (docs/perf-history.md v35). An eighth is the bar: a step with less
// has its softmax after the GEMMs instead of under them.
CheckResult bwd_exp_overlap(const KernelReport& k) {
  const CheckId id = CheckId::BwdExpOverlap;
  if (!k.mainloop || k.mainloop->loop.wgmma == 0)
    return {id, false, "no loop holds a wgmma: the step loop was not found"};
  const Mainloop& m = *k.mainloop;
  if (m.exp2 == 0) return {id, false, "no MUFU.EX2 in the step loop: no exponentials to overlap"};
  size_t best = 0, group = 0;
  // MUFU.EX2 alone, as m.exp2 counts: the row max (FMNMX) is not an exponential.
  for (size_t g = 0; g < m.groups.size(); ++g)
    if (m.groups[g].exp2_in_flight > best) best = m.groups[g].exp2_in_flight, group = g;
  const std::string seen = std::to_string(best) + " of the step's " + std::to_string(m.exp2) +
                           " MUFU.EX2 issue while a GEMM is in flight" +
                           (best > 0 ? " (group " + std::to_string(group + 1) + " of " +
                                           std::to_string(m.groups.size()) + ")"
                                     : std::string());
  if (8 * best >= m.exp2) return {id, true, seen};
  return {id, false, seen + ": fewer than an eighth, the softmax waits for the GEMMs"};
}

}  // namespace

bool KernelReport::pass() const {
  for (const CheckResult& c : checks)
    if (!c.pass) return false;
  return true;
}

const CheckResult* KernelReport::check(CheckId id) const {
  for (const CheckResult& c : checks)
    if (c.id == id) return &c;
  return nullptr;
}

CheckResult run_check(CheckId id, const KernelReport& facts) {
  switch (id) {
    case CheckId::NoSpills:
      return no_spills(facts);
    case CheckId::SetMaxReg:
      return setmaxreg(facts);
    case CheckId::TmaLoads:
      return tma_loads(facts);
    case CheckId::TmaReduceAdd:
      return tma_reduce_add(facts);
    case CheckId::WgmmaUsed:
      return wgmma_used(facts);
    case CheckId::WgmmaNotSerialized:
      return wgmma_not_serialized(facts);
    case CheckId::Fp8UsesQgmma:
      return fp8_uses_qgmma(facts);
    case CheckId::TwoStagePipeline:
      return two_stage_pipeline(facts);
    case CheckId::GemmSoftmaxOverlap:
      return gemm_softmax_overlap(facts);
    case CheckId::TmaMulticast:
      return tma_multicast(facts);
    case CheckId::UniformOperands:
      return uniform_operands(facts);
    case CheckId::HalfBlocks:
      return half_blocks(facts);
    case CheckId::BwdGemms:
      return bwd_gemms(facts);
    case CheckId::BwdExpOverlap:
      return bwd_exp_overlap(facts);
  }
  return {id, false, "unknown check"};
}

KernelReport analyze_kernel(const SassFunction& function, const KernelTraits& traits) {
  KernelReport k;
  k.name = function.name;
  k.traits = traits;
  k.resources = function.resources;
  k.mix = count_mix(function);
  k.serialization = measure_serialization(function);
  k.mainloop = find_mainloop(function);
  if (k.mainloop)
    k.mainloop_serialization = measure_serialization(function, k.mainloop->loop.first, k.mainloop->loop.last);
  if (!function.instructions.empty())
    k.groups = find_groups(function, 0, function.instructions.size() - 1);
  for (CheckId id : checks_for(traits)) k.checks.push_back(run_check(id, k));
  return k;
}

KernelReport analyze_kernel(const SassFunction& function) {
  return analyze_kernel(function, traits_from_name(function.name));
}

}  // namespace fa3::sass
