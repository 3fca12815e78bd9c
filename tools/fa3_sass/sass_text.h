// SASS text -> functions of instructions. Reads what `cuobjdump -sass`, `nvdisasm` and
// `cuobjdump -res-usage` print (any mix of them in one text), so a fixture can hold a kernel's
// listing and its resource line together.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fa3::sass {

struct Instruction {
  uint32_t address = 0;               // the /*addr*/ comment: byte offset in the function
  std::string predicate;              // "@P0", "@!UP1", or empty
  std::string opcode;                 // with its modifiers: "HGMMA.64x128x16.F32.BF16"
  std::vector<std::string> operands;  // top-level comma-separated, trimmed
  int line = 0;                       // 1-based line in the text, for messages

  // "HGMMA" of "HGMMA.64x128x16.F32.BF16".
  std::string base() const;
  bool has_operand(const std::string& text) const;
};

// What `cuobjdump -res-usage` (or nvdisasm's SHI_REGISTERS) says of a function; an empty
// field means the input did not say, and reports print "unknown" rather than a guess.
struct ResourceUsage {
  std::optional<int> registers;     // per thread
  std::optional<int> shared_bytes;  // static shared memory (dynamic shared is set at launch)
  std::optional<int> stack_bytes;
  std::optional<int> local_bytes;
};

struct SassFunction {
  std::string name;
  std::vector<Instruction> instructions;
  std::map<std::string, size_t> labels;  // ".L_x_3" -> index of the instruction it precedes
  ResourceUsage resources;

  // Index of the instruction at this address, or nullopt.
  std::optional<size_t> index_at(uint32_t address) const;
  // Where a branch goes: its label or absolute address resolved to an instruction index.
  std::optional<size_t> branch_target(const Instruction& branch) const;
};

struct SassText {
  std::vector<SassFunction> functions;  // in the order the text lists them
  // Functions whose listing began again after it had instructions (a fatbin of two
  // architectures, two dumps of one kernel): their instructions would mix, so the tools
  // refuse such a text rather than judge the mix.
  std::vector<std::string> listed_twice;
};

// Never fails: lines it does not recognize (headers, encodings, directives) are skipped.
// Instructions before any function header go to a function named "(unnamed)".
SassText parse_sass_text(const std::string& text);

// Splits "R24, gdesc[UR8], RZ, !UPT" at commas outside brackets.
std::vector<std::string> split_operands(const std::string& text);

}  // namespace fa3::sass
