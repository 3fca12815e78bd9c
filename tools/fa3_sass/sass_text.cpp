#include "sass_text.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

namespace fa3::sass {

namespace {

std::string trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool is_hex_digit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// "Function : NAME" (cuobjdump -sass) -> NAME.
std::optional<std::string> sass_function_header(const std::string& line) {
  if (!starts_with(line, "Function")) return std::nullopt;
  std::string rest = trim(line.substr(8));
  if (rest.empty() || rest[0] != ':') return std::nullopt;
  rest = trim(rest.substr(1));
  if (rest.empty() || rest.find(' ') != std::string::npos) return std::nullopt;
  return rest;
}

// "Function NAME:" (cuobjdump -res-usage) -> NAME.
std::optional<std::string> resource_function_header(const std::string& line) {
  if (!starts_with(line, "Function ")) return std::nullopt;
  std::string rest = trim(line.substr(9));
  if (rest.size() < 2 || rest.back() != ':') return std::nullopt;
  rest.pop_back();
  if (rest.find_first_of(" :") != std::string::npos) return std::nullopt;
  return rest;
}

// nvdisasm names a code section three ways; any of them starts that function:
//   //--------------------- .text.NAME ----------   .section .text.NAME,"ax",@progbits
//   .text.NAME:
// Other section headers end the current function (returned as an empty name).
std::optional<std::string> nvdisasm_section(const std::string& line) {
  std::string section;
  if (starts_with(line, "//-")) {
    const size_t first = line.find_first_not_of('-', 2);
    if (first == std::string::npos) return std::nullopt;
    const std::string rest = trim(line.substr(first));
    if (rest.empty() || rest[0] != '.') return std::nullopt;  // "//----- nvinfo : ..." is not one
    section = rest.substr(0, rest.find_first_of(" \t"));
  } else if (starts_with(line, ".section ") || starts_with(line, ".section\t")) {
    std::string rest = trim(line.substr(8));
    section = rest.substr(0, rest.find_first_of(", \t"));
  } else if (starts_with(line, ".text.") && line.back() == ':' &&
             line.find_first_of(" \t") == std::string::npos) {
    section = line.substr(0, line.size() - 1);
  } else {
    return std::nullopt;
  }
  if (starts_with(section, ".text.") && section.size() > 6) return section.substr(6);
  return std::string();
}

// `.sectioninfo @"SHI_REGISTERS=168"` -> 168.
std::optional<int> nvdisasm_registers(const std::string& line) {
  if (!starts_with(line, ".sectioninfo")) return std::nullopt;
  const size_t at = line.find("SHI_REGISTERS=");
  if (at == std::string::npos) return std::nullopt;
  return std::atoi(line.c_str() + at + 14);
}

// "REG:168 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:904 ..." -> the fields we report.
std::optional<ResourceUsage> resource_line(const std::string& line) {
  if (!starts_with(line, "REG:")) return std::nullopt;
  ResourceUsage r;
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const size_t colon = word.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = word.substr(0, colon);
    const int value = std::atoi(word.c_str() + colon + 1);
    if (key == "REG")
      r.registers = value;
    else if (key == "SHARED")
      r.shared_bytes = value;
    else if (key == "STACK")
      r.stack_bytes = value;
    else if (key == "LOCAL")
      r.local_bytes = value;
  }
  return r;
}

bool is_label(const std::string& line) {
  return line.size() > 1 && line.back() == ':' && line.find_first_of(" \t") == std::string::npos &&
         !starts_with(line, "/*");
}

bool is_dot_rule(const std::string& line) {
  return line.size() >= 5 && line.find_first_not_of('.') == std::string::npos;
}

// "/*0a40*/  @P0 HGMMA... ;  /* 0x... */" -> the instruction; nullopt for encoding-only lines
// ("/* 0x000fe4... */"), directives (".byte ...") and anything else.
std::optional<Instruction> instruction_line(std::string line, int line_number) {
  // nvdisasm -print-instruction-scheduling (or similar) may lead with "[B------:R-:W-:Y:S04]".
  if (starts_with(line, "[") && line.find(']') != std::string::npos)
    line = trim(line.substr(line.find(']') + 1));
  if (!starts_with(line, "/*")) return std::nullopt;
  size_t pos = 2;
  while (pos < line.size() && is_hex_digit(line[pos])) ++pos;
  if (pos == 2 || line.compare(pos, 2, "*/") != 0) return std::nullopt;
  Instruction in;
  in.address = static_cast<uint32_t>(std::strtoul(line.substr(2, pos - 2).c_str(), nullptr, 16));
  in.line = line_number;
  std::string body = line.substr(pos + 2);
  const size_t comment = body.find("/*");
  if (comment != std::string::npos) body = body.substr(0, comment);
  body = trim(body);
  // Dual-issue braces of old architectures; harmless to drop.
  if (!body.empty() && body[0] == '{') body = trim(body.substr(1));
  if (!body.empty() && body.back() == '}') body = trim(body.substr(0, body.size() - 1));
  if (!body.empty() && body.back() == ';') body = trim(body.substr(0, body.size() - 1));
  if (body.empty() || body[0] == '.') return std::nullopt;
  if (body[0] == '@') {
    const size_t end = body.find_first_of(" \t");
    if (end == std::string::npos) return std::nullopt;
    in.predicate = body.substr(0, end);
    body = trim(body.substr(end));
  }
  const size_t end = body.find_first_of(" \t");
  in.opcode = body.substr(0, end);
  if (end != std::string::npos) in.operands = split_operands(body.substr(end));
  return in;
}

// Collects functions while the lines go by.
class Parser {
 public:
  void line(const std::string& raw, int number) {
    const std::string line = trim(raw);
    if (line.empty()) return;
    if (auto name = sass_function_header(line)) return open_function(*name);
    if (auto name = resource_function_header(line)) {
      resource_owner_ = *name;
      return;
    }
    if (auto usage = resource_line(line)) return attach_resources(*usage);
    if (auto section = nvdisasm_section(line)) {
      if (section->empty())
        current_ = nullptr;
      else
        open_function(*section);
      return;
    }
    if (is_dot_rule(line)) {
      current_ = nullptr;
      return;
    }
    if (auto registers = nvdisasm_registers(line)) {
      if (current_) current_->resources.registers = *registers;
      return;
    }
    if (auto in = instruction_line(line, number)) {
      if (!current_) open_function("(unnamed)");
      current_->instructions.push_back(*in);
      return;
    }
    if (is_label(line) && current_) {
      current_->labels[line.substr(0, line.size() - 1)] = current_->instructions.size();
    }
  }

  SassText finish() {
    // -res-usage output may come before or after the listing of the same function.
    for (auto& [name, usage] : pending_resources_) {
      if (SassFunction* f = find(name)) merge(f->resources, usage);
    }
    return std::move(text_);
  }

 private:
  SassFunction* find(const std::string& name) {
    for (SassFunction& f : text_.functions)
      if (f.name == name) return &f;
    return nullptr;
  }

  void open_function(const std::string& name) {
    if (current_ && current_->name == name && current_->instructions.empty()) return;
    current_ = find(name);
    if (current_) {
      if (!current_->instructions.empty() &&
          std::find(text_.listed_twice.begin(), text_.listed_twice.end(), name) ==
              text_.listed_twice.end())
        text_.listed_twice.push_back(name);
      return;
    }
    text_.functions.push_back(SassFunction{});
    current_ = &text_.functions.back();
    current_->name = name;
  }

  static void merge(ResourceUsage& into, const ResourceUsage& from) {
    if (from.registers) into.registers = from.registers;
    if (from.shared_bytes) into.shared_bytes = from.shared_bytes;
    if (from.stack_bytes) into.stack_bytes = from.stack_bytes;
    if (from.local_bytes) into.local_bytes = from.local_bytes;
  }

  void attach_resources(const ResourceUsage& usage) {
    if (resource_owner_.empty()) return;
    merge(pending_resources_[resource_owner_], usage);
    resource_owner_.clear();
  }

  SassText text_;
  SassFunction* current_ = nullptr;  // re-pointed after every append to functions
  std::string resource_owner_;
  std::map<std::string, ResourceUsage> pending_resources_;
};

}  // namespace

std::string Instruction::base() const { return opcode.substr(0, opcode.find('.')); }

bool Instruction::has_operand(const std::string& text) const {
  for (const std::string& op : operands)
    if (op == text) return true;
  return false;
}

std::optional<size_t> SassFunction::index_at(uint32_t address) const {
  for (size_t i = 0; i < instructions.size(); ++i)
    if (instructions[i].address == address) return i;
  return std::nullopt;
}

std::optional<size_t> SassFunction::branch_target(const Instruction& branch) const {
  for (auto it = branch.operands.rbegin(); it != branch.operands.rend(); ++it) {
    const std::string& op = *it;
    const size_t open = op.find('(');
    const size_t close = op.rfind(')');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      auto label = labels.find(op.substr(open + 1, close - open - 1));
      if (label != labels.end()) return label->second;
      return std::nullopt;
    }
    if (starts_with(op, "0x")) return index_at(static_cast<uint32_t>(std::strtoul(op.c_str(), nullptr, 16)));
  }
  return std::nullopt;
}

std::vector<std::string> split_operands(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '(' || c == '{') ++depth;
    if (c == ']' || c == ')' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  current = trim(current);
  if (!current.empty()) out.push_back(current);
  return out;
}

SassText parse_sass_text(const std::string& text) {
  Parser parser;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) parser.line(line, ++number);
  return parser.finish();
}

}  // namespace fa3::sass
