// Command-line value parsing shared by fa3-bench and fa3-tune: numbers, dtypes, head dims,
// causal flags, comma lists, and help-text wrapping. Each parser throws ArgumentError with one
// sentence (without the program name; the program's parser adds it) on a bad value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace fa3bench::cli {

struct ArgumentError {
  std::string sentence;
};
[[noreturn]] void fail(const std::string& sentence);

std::string lowercase(std::string s);
// Decimal digits only, optionally followed by 'k' (x1024) when allow_k; nullopt otherwise or
// at 2^31 and above (cuBLAS and grid sizes are 32-bit).
std::optional<int64_t> parse_count(const std::string& text, bool allow_k);
int64_t positive(const std::string& option, const std::string& value, bool allow_k = false);
int non_negative(const std::string& option, const std::string& value);
DType parse_dtype(const std::string& value);
int parse_head_dim(const std::string& value);
bool parse_causal(const std::string& value);

// "a,b,c" -> the parsed items, duplicates dropped (first kept); an empty item is passed to
// parse_item, which rejects it.
std::vector<std::string> split_list(const std::string& value);
template <typename T>
std::vector<T> parse_list(const std::string& option, const std::string& value,
                          const std::function<T(const std::string&)>& parse_item) {
  if (value.empty()) fail(option + " needs at least one value.");
  std::vector<T> items;
  for (const std::string& item : split_list(value)) {
    const T x = parse_item(item);
    bool seen = false;
    for (const T& y : items) seen = seen || y == x;
    if (!seen) items.push_back(x);
  }
  return items;
}

// An option's help wrapped at word boundaries to `width` columns, continuation lines
// indented to the help column `indent`.
std::string wrap_help(const std::string& text, size_t indent, size_t width);

}  // namespace fa3bench::cli
