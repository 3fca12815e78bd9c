#include "cli_values.h"

#include <cctype>
#include <sstream>

namespace fa3bench::cli {

namespace {
constexpr int64_t kMaxDimension = int64_t{1} << 31;
}

void fail(const std::string& sentence) { throw ArgumentError{sentence}; }

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> items;
  std::stringstream in(value);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  if (!value.empty() && value.back() == ',') items.push_back("");
  return items;
}

std::optional<int64_t> parse_count(const std::string& text, bool allow_k) {
  std::string digits = text;
  int64_t multiplier = 1;
  if (allow_k && !digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) {
    digits.pop_back();
    multiplier = 1024;
  }
  if (digits.empty() || digits.size() > 12) return std::nullopt;
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  value *= multiplier;
  if (value >= kMaxDimension) return std::nullopt;
  return value;
}

int64_t positive(const std::string& option, const std::string& value, bool allow_k) {
  const std::optional<int64_t> n = parse_count(value, allow_k);
  if (!n || *n < 1)
    fail(option + " must be a positive integer" + (allow_k ? " (or Nk = N*1024)" : "") +
         ", got '" + value + "'.");
  return *n;
}

int non_negative(const std::string& option, const std::string& value) {
  const std::optional<int64_t> n = parse_count(value, false);
  if (!n) fail(option + " must be a non-negative integer, got '" + value + "'.");
  return static_cast<int>(*n);
}

int launch_count(const std::string& option, const std::string& value, bool allow_zero) {
  const int64_t n = allow_zero ? non_negative(option, value) : positive(option, value);
  if (n > kMaxLaunches)
    fail(option + " must be at most " + std::to_string(kMaxLaunches) + " launches, got " +
         value + ".");
  return static_cast<int>(n);
}

int round_count(const std::string& option, const std::string& value) {
  const int64_t n = positive(option, value);
  if (n > kMaxRounds)
    fail(option + " must be at most " + std::to_string(kMaxRounds) + " rounds, got " + value + ".");
  return static_cast<int>(n);
}

double non_negative_number(const std::string& option, const std::string& value) {
  size_t used = 0;
  double x = -1;
  try {
    x = std::stod(value, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !(x >= 0) || x > 1000)
    fail(option + " must be a number from 0 to 1000 (got '" + value + "').");
  return x;
}

DType parse_dtype(const std::string& value) {
  const std::string v = lowercase(value);
  if (v == "fp16" || v == "f16" || v == "half" || v == "float16") return DType::F16;
  if (v == "bf16" || v == "bfloat16") return DType::BF16;
  fail("--dtype must be a list of fp16 (also f16, half) and bf16, got '" + value + "'.");
}

int parse_head_dim(const std::string& value) {
  const std::optional<int64_t> n = parse_count(value, false);
  if (!n || (*n != 64 && *n != 128 && *n != 256))
    fail("--hdim must be a list of 64, 128 and 256 (the head dims fa3 supports), got '" + value +
         "'.");
  return static_cast<int>(*n);
}

bool parse_causal(const std::string& value) {
  const std::string v = lowercase(value);
  if (v == "0" || v == "false") return false;
  if (v == "1" || v == "true") return true;
  fail("--causal must be 0, 1 or the list 0,1, got '" + value + "'.");
}

std::string wrap_help(const std::string& text, size_t indent, size_t width) {
  std::istringstream words(text);
  std::string out, word;
  size_t column = indent;
  while (words >> word) {
    if (column > indent && column + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

}  // namespace fa3bench::cli
