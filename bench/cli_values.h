// Command-line value parsing shared by fa3-bench and fa3-tune: numbers, dtypes, head dims,
// causal flags, comma lists, and help-text wrapping. Each parser throws ArgumentError with one
// sentence (without the program name; the program's parser adds it) on a bad value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
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
// Launch counts (--warmup, --iters) and rounds: within kMaxLaunches / kMaxRounds, so that a
// typo such as --iters 2147483647 is an argument error, not billions of CUDA events.
constexpr int64_t kMaxLaunches = 1000000, kMaxRounds = 1000;
int launch_count(const std::string& option, const std::string& value, bool allow_zero);
int round_count(const std::string& option, const std::string& value);
// A decimal number from 0 to 1000 (a factor such as --cooldown).
double non_negative_number(const std::string& option, const std::string& value);
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

// One option of a program: --name VALUE (or --name=VALUE), or a flag when value_name is null.
template <typename Options>
struct OptionSpec {
  const char* name;
  const char* value_name;
  const char* help;
  std::function<void(Options&, const std::string&)> apply;
};

// Applies argv[1..] to `o` through `specs` (-h is --help) and records each option given in
// *given. Returns true when --help was asked for (nothing after it is read). Unknown options,
// missing or unexpected values (a separate value that begins with "--": only --name=value
// takes one) and, when reject_repeats, an option given twice are ArgumentErrors naming
// `program`'s --help.
template <typename Options>
bool apply_arguments(int argc, const char* const* argv,
                     const std::vector<OptionSpec<Options>>& specs, const std::string& program,
                     bool reject_repeats, Options& o, std::set<std::string>* given) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") arg = "--help";
    std::optional<std::string> inline_value;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const OptionSpec<Options>* spec = nullptr;
    for (const OptionSpec<Options>& s : specs)
      if (arg == s.name) spec = &s;
    if (!spec) fail("unknown option '" + std::string(argv[i]) + "' (see " + program + " --help).");
    if (arg == "--help") return true;
    if (reject_repeats && given->count(arg)) fail(arg + " is given twice; give it once.");
    std::string value;
    if (spec->value_name) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < argc) {
        value = argv[++i];
        // "--csv --check" is a forgotten value, not a file named --check.
        if (value.rfind("--", 0) == 0)
          fail(arg + " needs a value (" + spec->value_name + "), not the option '" + value +
               "'; write " + arg + "=" + value + " for a value that begins with '--'.");
      } else {
        fail(arg + " needs a value (" + spec->value_name + ").");
      }
    } else if (inline_value) {
      fail(arg + " is a flag and takes no value, got '" + *inline_value + "'.");
    }
    spec->apply(o, value);
    given->insert(arg);
  }
  return false;
}

// An option's help wrapped at word boundaries to `width` columns, continuation lines
// indented to the help column `indent`.
std::string wrap_help(const std::string& text, size_t indent, size_t width);

}  // namespace fa3bench::cli
