#include "structure.h"

#include <cstdlib>

#include "instruction_class.h"

namespace fa3::sass {

namespace {

bool is_wgmma(const Instruction& in) { return is_wgmma(classify(in)); }

bool commits_group(const Instruction& in) { return in.has_operand("gsb0"); }

// N of "WARPGROUP.DEPBAR.LE gsb0, 0x1"; 0 when absent (the strictest reading).
int pending_groups(const Instruction& wait) {
  if (wait.operands.size() < 2) return 0;
  return static_cast<int>(std::strtol(wait.operands.back().c_str(), nullptr, 0));
}

// 0x18 or 24; nullopt for anything else (a register, a predicate).
std::optional<int> immediate(const std::string& operand) {
  if (operand.empty() || operand[0] < '0' || operand[0] > '9') return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(operand.c_str(), &end, 0);
  if (end == nullptr || *end != '\0' || v < 0 || v > 1 << 16) return std::nullopt;
  return static_cast<int>(v);
}

bool is_register(const std::string& operand) {
  return operand.size() > 1 && operand[0] == 'R' && operand[1] >= '0' && operand[1] <= '9';
}

}  // namespace

WgmmaKind wgmma_kind(const Instruction& in) {
  WgmmaKind k;
  k.opcode = in.base();
  const size_t dot = in.opcode.find('.');
  if (dot != std::string::npos) k.shape = in.opcode.substr(dot + 1, in.opcode.find('.', dot + 1) - dot - 1);
  // Operand 0 is D; operand 1 is A: a descriptor (gdesc[URn]) in the SS form, a register
  // quadruple base (Rn) in the RS form.
  k.operands = in.operands.size() > 1 && is_register(in.operands[1]) ? "RS" : "SS";
  return k;
}

InstructionMix count_mix(const SassFunction& f) {
  InstructionMix m;
  m.instructions = f.instructions.size();
  for (const Instruction& in : f.instructions) {
    const std::string& op = in.opcode;
    const std::string base = in.base();
    if ((base == "RED" || base == "REDG" || base == "ATOM" || base == "ATOMG") &&
        op.find(".ADD") != std::string::npos &&
        (op.find(".F32") != std::string::npos || op.find("F16") != std::string::npos ||
         op.find(".F64") != std::string::npos))
      ++m.float_atomic_adds;
    switch (classify(in)) {
      case InstrClass::Hgmma:
        ++m.hgmma;
        ++m.wgmma_kinds[wgmma_kind(in)];
        break;
      case InstrClass::Qgmma:
        ++m.qgmma;
        ++m.wgmma_kinds[wgmma_kind(in)];
        break;
      case InstrClass::WarpMma:
        ++m.warp_mma;
        break;
      case InstrClass::WgmmaArrive:
        ++m.wgmma_arrive;
        break;
      case InstrClass::WgmmaWait:
        ++m.wgmma_wait;
        break;
      case InstrClass::Exp2:
        ++m.mufu_ex2;
        break;
      case InstrClass::Convert:
        ++m.f2fp;
        break;
      case InstrClass::RowMax:
        ++m.fmnmx;
        break;
      case InstrClass::Shuffle:
        m.shfl_bfly += op.rfind("SHFL.BFLY", 0) == 0;
        break;
      case InstrClass::Barrier:
        m.bar_sync += op.rfind("BAR.SYNC", 0) == 0;
        m.bar_arv += op.rfind("BAR.ARV", 0) == 0;
        break;
      case InstrClass::Mbarrier:
        ++m.syncs;
        break;
      case InstrClass::Tma:
        m.utmaldg += in.base() == "UTMALDG";
        m.utmaldg_multicast += in.base() == "UTMALDG" && op.find(".MULTICAST") != std::string::npos;
        m.utmastg += in.base() == "UTMASTG";
        m.utmaredg += in.base() == "UTMAREDG";
        m.utmaredg_add += in.base() == "UTMAREDG" && op.find(".ADD") != std::string::npos;
        m.ublkred += in.base() == "UBLKRED";
        m.ublkred_add += in.base() == "UBLKRED" && op.find(".ADD") != std::string::npos;
        break;
      case InstrClass::LocalMemory:
        (in.base() == "LDL" ? m.ldl : m.stl)++;
        break;
      case InstrClass::SetMaxReg:
      {
        // USETMAXREG.DEALLOC.CTAPOOL 0x18 (setmaxnreg.dec, producer) vs
        // USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0 (setmaxnreg.inc): the count is the last operand.
        const bool dealloc = op.find(".DEALLOC") != std::string::npos;
        (dealloc ? m.usetmaxreg_dealloc : m.usetmaxreg_alloc)++;
        if (const std::optional<int> regs = immediate(in.operands.empty() ? "" : in.operands.back()))
          (dealloc ? m.usetmaxreg_dealloc_regs : m.usetmaxreg_alloc_regs).push_back(*regs);
        break;
      }
      default:
        break;
    }
  }
  return m;
}

namespace {

bool is_unconditional_exit(const Instruction& in) {
  return in.base() == "EXIT" && (in.predicate.empty() || in.predicate == "@PT");
}

// ptxas moves slow paths (an mbarrier try-wait retry, say) past the kernel's EXIT and jumps
// back from there: a backward branch whose range holds an unconditional EXIT is such a return
// from out-of-line code, not a loop.
bool spans_an_exit(const SassFunction& f, size_t first, size_t last) {
  for (size_t i = first; i < last; ++i)
    if (is_unconditional_exit(f.instructions[i])) return true;
  return false;
}

}  // namespace

std::vector<Loop> find_loops(const SassFunction& f) {
  std::vector<Loop> loops;
  for (size_t i = 0; i < f.instructions.size(); ++i) {
    if (classify(f.instructions[i]) != InstrClass::Branch) continue;
    const std::optional<size_t> target = f.branch_target(f.instructions[i]);
    if (!target || *target > i || spans_an_exit(f, *target, i)) continue;
    Loop loop{*target, i, 0, 0};
    for (size_t j = loop.first; j <= loop.last; ++j) {
      const InstrClass c = classify(f.instructions[j]);
      loop.wgmma += is_wgmma(c);
      loop.warp_mma += c == InstrClass::WarpMma;
    }
    for (size_t j = loop.first; j < loop.last && !loop.alternative_bodies; ++j) {
      if (classify(f.instructions[j]) != InstrClass::Branch) continue;
      const std::optional<size_t> skip_to = f.branch_target(f.instructions[j]);
      if (!skip_to || *skip_to <= j || *skip_to > loop.last) continue;
      for (size_t k = j + 1; k < *skip_to && !loop.alternative_bodies; ++k)
        loop.alternative_bodies = is_wgmma(f.instructions[k]);
    }
    loops.push_back(loop);
  }
  return loops;
}

std::string WgmmaGroup::kind_summary() const {
  std::string out;
  for (const auto& [kind, count] : kinds) {
    if (!out.empty()) out += " + ";
    out += std::to_string(count) + " x " + kind.opcode + "." + kind.shape + " " + kind.operands;
  }
  return out;
}

std::vector<WgmmaGroup> find_groups(const SassFunction& f, size_t first, size_t last) {
  std::vector<WgmmaGroup> groups;
  std::optional<WgmmaGroup> open;
  auto close = [&](bool committed) {
    WgmmaGroup g = *open;
    g.committed = committed;
    for (size_t j = g.first; j <= g.last; ++j) {
      const InstrClass c = classify(f.instructions[j]);
      if (is_wgmma(c)) continue;
      ++g.between;
      g.between_softmax += is_softmax_work(c);
    }
    groups.push_back(g);
    open.reset();
  };
  for (size_t i = first; i <= last && i < f.instructions.size(); ++i) {
    const Instruction& in = f.instructions[i];
    if (!is_wgmma(in)) continue;
    if (!open) {
      open = WgmmaGroup{};
      open->first = i;
    }
    open->last = i;
    ++open->wgmma;
    ++open->kinds[wgmma_kind(in)];
    if (commits_group(in)) close(true);
  }
  if (open) close(false);
  return groups;
}

const char* to_string(SoftmaxPosition p) {
  switch (p) {
    case SoftmaxPosition::None:
      return "none";
    case SoftmaxPosition::Before:
      return "before";
    case SoftmaxPosition::Inside:
      return "inside";
    case SoftmaxPosition::After:
      return "after";
  }
  return "none";
}

namespace {

// Innermost loops with the tensor-core instruction counted by `ops`: an outer (persistent
// tile) loop holds every HGMMA of the kernel, so "most HGMMAs" alone would pick it instead of
// the mainloop. A loop of alternative bodies (the masked steps of an _hb kernel: half or full
// width) counts the GEMMs of both, so it is taken only when no innermost loop is straight.
std::optional<Loop> pick_mainloop(const std::vector<Loop>& loops, size_t Loop::*ops) {
  auto better = [ops](const Loop& a, const Loop& b) {
    if (a.alternative_bodies != b.alternative_bodies) return !a.alternative_bodies;
    if (a.*ops != b.*ops) return a.*ops > b.*ops;
    return a.size() < b.size();
  };
  std::optional<Loop> best;
  for (const Loop& candidate : loops) {
    if (candidate.*ops == 0) continue;
    bool holds_inner_candidate = false;
    for (const Loop& other : loops) holds_inner_candidate |= other.*ops > 0 && candidate.contains(other);
    if (holds_inner_candidate) continue;
    if (!best || better(candidate, *best)) best = candidate;
  }
  return best;
}

SoftmaxPosition softmax_position(std::optional<size_t> start, const std::vector<WgmmaGroup>& groups) {
  if (!start || groups.empty()) return SoftmaxPosition::None;
  if (*start < groups.front().first) return SoftmaxPosition::Before;
  if (*start <= groups.front().last) return SoftmaxPosition::Inside;
  return SoftmaxPosition::After;
}

}  // namespace

// A wait "DEPBAR.LE gsb0, N" retires every group with at least N groups committed after it.
void measure_in_flight(const SassFunction& f, const Loop& loop, std::vector<WgmmaGroup>& groups) {
  for (size_t g = 0; g < groups.size(); ++g) {
    WgmmaGroup& group = groups[g];
    size_t committed_after = 0, next = g + 1;
    for (size_t i = group.first + 1; i <= loop.last; ++i) {
      if (next < groups.size() && i == groups[next].last) {
        ++committed_after;
        ++next;
      }
      const InstrClass c = classify(f.instructions[i]);
      if (c == InstrClass::WgmmaWait &&
          static_cast<int>(committed_after) >= pending_groups(f.instructions[i])) {
        group.retired_at = i;
        break;
      }
      group.softmax_in_flight += is_softmax_work(c);
      group.softmax_math_in_flight += c == InstrClass::RowMax || c == InstrClass::Exp2;
      group.exp2_in_flight += c == InstrClass::Exp2;
    }
  }
}

namespace {

// "UR44" -> 44; nullopt for anything else.
std::optional<int> uniform_register(const std::string& operand) {
  if (operand.size() < 3 || operand.compare(0, 2, "UR") != 0) return std::nullopt;
  int n = 0;
  for (size_t c = 2; c < operand.size(); ++c) {
    if (operand[c] < '0' || operand[c] > '9') return std::nullopt;
    n = 10 * n + (operand[c] - '0');
  }
  return n;
}

// The first uniform register of a wgmma's descriptor operand "gdesc[UR44]" (".tnspB" and
// other suffixes allowed); the descriptors it reads are that register and the next three.
std::optional<int> descriptor_base(const Instruction& in) {
  for (const std::string& op : in.operands) {
    const size_t open = op.find("gdesc[");
    if (open == std::string::npos) continue;
    const size_t close = op.find(']', open);
    if (close == std::string::npos) continue;
    return uniform_register(op.substr(open + 6, close - open - 6));
  }
  return std::nullopt;
}

// What instruction i of a loop [first, last] moves into a wgmma descriptor register.
enum class DescriptorMove {
  None,       // not an R2UR feeding a descriptor of the loop, or one of a value from before it
  PerThread,  // a value an earlier instruction of the loop computed in a vector register
  Parked,     // a uniform register's value the loop copied into a vector register (MOV R, UR)
};

// Whether instruction i, in a loop [first, last], is an R2UR of a register an earlier
// instruction of the loop wrote, into a uniform register a wgmma of the loop then reads as
// a descriptor before anything overwrites it: a descriptor rebuilt per thread every
// iteration, or (Parked) one ptxas keeps in a vector register between uses because the 63
// uniform registers ran out, the same value going out and back in.
DescriptorMove descriptor_move(const SassFunction& f, size_t first, size_t i, size_t last) {
  const Instruction& in = f.instructions[i];
  if (in.base() != "R2UR" || in.operands.size() < 2) return DescriptorMove::None;
  const Instruction* writer = nullptr;
  for (size_t j = i; j-- > first;)
    if (!f.instructions[j].operands.empty() && f.instructions[j].operands[0] == in.operands[1]) {
      writer = &f.instructions[j];
      break;
    }
  const std::optional<int> dst = uniform_register(in.operands[0]);
  if (!writer || !dst) return DescriptorMove::None;
  const bool parked = writer->base() == "MOV" && writer->operands.size() == 2 &&
                      uniform_register(writer->operands[1]).has_value();
  for (size_t j = i + 1; j <= last; ++j) {
    const Instruction& next = f.instructions[j];
    if (is_wgmma(classify(next))) {
      const std::optional<int> base = descriptor_base(next);
      if (base && *dst >= *base && *dst < *base + 4)
        return parked ? DescriptorMove::Parked : DescriptorMove::PerThread;
    }
    if (!next.operands.empty() && next.operands[0] == in.operands[0]) return DescriptorMove::None;
  }
  return DescriptorMove::None;
}

}  // namespace

std::optional<Mainloop> find_mainloop(const SassFunction& f) {
  const std::vector<Loop> loops = find_loops(f);
  std::optional<Loop> loop = pick_mainloop(loops, &Loop::wgmma);
  if (!loop) loop = pick_mainloop(loops, &Loop::warp_mma);
  if (!loop) return std::nullopt;
  Mainloop m;
  m.loop = *loop;
  m.first_address = f.instructions[loop->first].address;
  m.last_address = f.instructions[loop->last].address;
  m.groups = find_groups(f, loop->first, loop->last);
  for (size_t i = loop->first; i <= loop->last; ++i) {
    const Instruction& in = f.instructions[i];
    const InstrClass c = classify(in);
    if (c == InstrClass::WgmmaWait) m.waits.push_back({i, pending_groups(in)});
    if (!m.softmax_start && (c == InstrClass::RowMax || c == InstrClass::Exp2)) m.softmax_start = i;
    m.exp2 += c == InstrClass::Exp2;
    m.membar_gpu += in.base() == "MEMBAR" && (in.opcode.find(".GPU") != std::string::npos ||
                                              in.opcode.find(".SYS") != std::string::npos);
  }
  for (size_t i = loop->first; i <= loop->last; ++i) {
    const DescriptorMove move = descriptor_move(f, loop->first, i, loop->last);
    if (move == DescriptorMove::PerThread) {
      if (!m.first_r2ur_of_loop_value) m.first_r2ur_of_loop_value = i;
      ++m.r2ur_of_loop_values;
    }
    m.r2ur_of_parked_values += move == DescriptorMove::Parked;
  }
  m.softmax_position = softmax_position(m.softmax_start, m.groups);
  measure_in_flight(f, *loop, m.groups);
  m.picture = picture(f.instructions, loop->first, loop->last);
  return m;
}

Serialization measure_serialization(const SassFunction& f) {
  if (f.instructions.empty()) return {};
  return measure_serialization(f, 0, f.instructions.size() - 1);
}

Serialization measure_serialization(const SassFunction& f, size_t first, size_t last) {
  Serialization s;
  std::optional<size_t> previous;  // index of the previous wgmma
  bool wait_since = false, arrive_since = false;
  for (size_t i = first; i <= last && i < f.instructions.size(); ++i) {
    const InstrClass c = classify(f.instructions[i]);
    if (c == InstrClass::WgmmaWait) wait_since = true;
    if (c == InstrClass::WgmmaArrive) arrive_since = true;
    if (!is_wgmma(c)) continue;
    if (previous) {
      ++s.pairs;
      // A fence inside an open group (no gsb0 yet) means ptxas had to re-arrive between
      // two wgmmas of one group; a wait between any two means they did not overlap.
      const bool group_open = !commits_group(f.instructions[*previous]);
      s.separated += wait_since || (group_open && arrive_since);
    }
    previous = i;
    wait_since = arrive_since = false;
  }
  return s;
}

}  // namespace fa3::sass
