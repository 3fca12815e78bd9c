// The instruction classes the analysis and the pictures care about, one character each.
// The alphabet is part of the documented output (docs/fa3_sass.md): change it only with
// the docs and the JSON schema version.
#pragma once

#include <string>
#include <vector>

#include "sass_text.h"

namespace fa3::sass {

enum class InstrClass {
  Hgmma,        // G  HGMMA: 16-bit wgmma
  Qgmma,        // Q  QGMMA: fp8 wgmma
  WarpMma,      // H  HMMA/IMMA: warp-level mma.sync, the pre-Hopper tensor-core path
  WgmmaArrive,  // A  WARPGROUP.ARRIVE: wgmma.fence
  WgmmaWait,    // W  WARPGROUP.DEPBAR: wgmma.wait_group
  Exp2,         // E  MUFU.EX2
  Convert,      // C  F2FP: fp32 -> 16-bit / fp8 packing
  RowMax,       // M  FMNMX
  Shuffle,      // S  SHFL
  FloatAdd,     // +  FADD
  FloatMul,     // *  FMUL, FFMA
  Barrier,      // B  BAR.SYNC / BAR.ARV / BAR.*: named barriers
  Mbarrier,     // Y  SYNCS.*: mbarrier arrive / wait
  Tma,          // T  UTMALDG / UTMASTG / other UTMA* / UBLK*
  LocalMemory,  // L  LDL / STL: spills
  Branch,       // J  BRA / BRX / JMP
  SetMaxReg,    // R  USETMAXREG
  Bookkeeping,  // u  uniform-datapath and R2UR descriptor arithmetic, NOP
  Other,        // .  everything else
};

InstrClass classify(const Instruction& in);
char picture_char(InstrClass c);

// Classes of the softmax and its O rescaling (paper Algorithm 1 lines 8-11): what the 2-stage
// pipeline wants to see between the HGMMAs of the first WGMMA.
bool is_softmax_work(InstrClass c);
bool is_wgmma(InstrClass c);

// One character per instruction of [first, last] in program order.
std::string picture(const std::vector<Instruction>& instructions, size_t first, size_t last);

struct LegendEntry {
  char symbol;
  const char* meaning;
};
const std::vector<LegendEntry>& picture_legend();

}  // namespace fa3::sass
