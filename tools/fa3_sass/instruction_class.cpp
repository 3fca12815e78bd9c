#include "instruction_class.h"

namespace fa3::sass {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Uniform-datapath work that feeds wgmma descriptors and loop counters (UIADD3 UR8, ...)
// sits between HGMMAs even in a packed group; it is not softmax work. TMA and setmaxnreg
// also live in the uniform datapath but have classes of their own.
bool is_uniform_bookkeeping(const std::string& base) {
  if (base == "R2UR" || base == "NOP" || base == "S2UR") return true;
  return base.size() > 1 && base[0] == 'U' && !starts_with(base, "UTMA") && !starts_with(base, "UBLK") &&
         base != "USETMAXREG";
}

}  // namespace

InstrClass classify(const Instruction& in) {
  const std::string base = in.base();
  const std::string& op = in.opcode;
  if (base == "HGMMA") return InstrClass::Hgmma;
  if (base == "QGMMA") return InstrClass::Qgmma;
  if (base == "HMMA" || base == "IMMA") return InstrClass::WarpMma;
  if (starts_with(op, "WARPGROUP.ARRIVE")) return InstrClass::WgmmaArrive;
  if (starts_with(op, "WARPGROUP.DEPBAR")) return InstrClass::WgmmaWait;
  if (starts_with(op, "MUFU.EX2")) return InstrClass::Exp2;
  if (base == "F2FP") return InstrClass::Convert;
  // The row max: float max, or (_im) the 3-input integer max over the exponents' bits.
  if (base == "FMNMX" || base == "VIMNMX3") return InstrClass::RowMax;
  if (base == "SHFL") return InstrClass::Shuffle;
  if (base == "FADD") return InstrClass::FloatAdd;
  if (base == "FMUL" || base == "FFMA") return InstrClass::FloatMul;
  if (base == "BAR") return InstrClass::Barrier;
  if (base == "SYNCS") return InstrClass::Mbarrier;
  if (starts_with(base, "UTMA") || starts_with(base, "UBLK")) return InstrClass::Tma;
  if (base == "LDL" || base == "STL") return InstrClass::LocalMemory;
  if (base == "BRA" || base == "BRX" || base == "JMP" || base == "JMX") return InstrClass::Branch;
  if (base == "USETMAXREG") return InstrClass::SetMaxReg;
  if (is_uniform_bookkeeping(base)) return InstrClass::Bookkeeping;
  return InstrClass::Other;
}

char picture_char(InstrClass c) {
  switch (c) {
    case InstrClass::Hgmma:
      return 'G';
    case InstrClass::Qgmma:
      return 'Q';
    case InstrClass::WarpMma:
      return 'H';
    case InstrClass::WgmmaArrive:
      return 'A';
    case InstrClass::WgmmaWait:
      return 'W';
    case InstrClass::Exp2:
      return 'E';
    case InstrClass::Convert:
      return 'C';
    case InstrClass::RowMax:
      return 'M';
    case InstrClass::Shuffle:
      return 'S';
    case InstrClass::FloatAdd:
      return '+';
    case InstrClass::FloatMul:
      return '*';
    case InstrClass::Barrier:
      return 'B';
    case InstrClass::Mbarrier:
      return 'Y';
    case InstrClass::Tma:
      return 'T';
    case InstrClass::LocalMemory:
      return 'L';
    case InstrClass::Branch:
      return 'J';
    case InstrClass::SetMaxReg:
      return 'R';
    case InstrClass::Bookkeeping:
      return 'u';
    case InstrClass::Other:
      return '.';
  }
  return '.';
}

bool is_softmax_work(InstrClass c) {
  return c == InstrClass::Exp2 || c == InstrClass::Convert || c == InstrClass::RowMax ||
         c == InstrClass::Shuffle || c == InstrClass::FloatAdd || c == InstrClass::FloatMul;
}

bool is_wgmma(InstrClass c) { return c == InstrClass::Hgmma || c == InstrClass::Qgmma; }

std::string picture(const std::vector<Instruction>& instructions, size_t first, size_t last) {
  std::string out;
  for (size_t i = first; i <= last && i < instructions.size(); ++i)
    out += picture_char(classify(instructions[i]));
  return out;
}

const std::vector<LegendEntry>& picture_legend() {
  static const std::vector<LegendEntry> legend = {
      {'G', "HGMMA"},
      {'Q', "QGMMA"},
      {'H', "HMMA/IMMA"},
      {'A', "WARPGROUP.ARRIVE"},
      {'W', "WARPGROUP.DEPBAR"},
      {'E', "MUFU.EX2"},
      {'C', "F2FP"},
      {'M', "FMNMX/VIMNMX3"},
      {'S', "SHFL"},
      {'+', "FADD"},
      {'*', "FMUL/FFMA"},
      {'B', "BAR"},
      {'Y', "SYNCS"},
      {'T', "UTMA*/UBLK*"},
      {'L', "LDL/STL"},
      {'J', "BRA"},
      {'R', "USETMAXREG"},
      {'u', "uniform/R2UR/NOP"},
      {'.', "other"},
  };
  return legend;
}

}  // namespace fa3::sass
