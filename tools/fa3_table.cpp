// fa3-table: validate, show and query tuning tables (schema: docs/tuning_table.md), list the
// kernels compiled into libfa3 and explain kernel names (forward: the registry of their tokens,
// src/kernels/fwd_names.h; backward: bwd_config.h's grammar). Needs no GPU and no driver.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fa3/fa3.h"
#include "runtime/backward_problem.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

namespace {

using fa3::TuningTable;

constexpr int kExitFailed = 1;  // a table is invalid, cannot be loaded, or has no entry
constexpr int kExitUsage = 2;

const char kUsage[] =
    "usage: fa3-table COMMAND [ARGS]\n"
    "\n"
    "Checks and inspects fa3 tuning tables (schema: docs/tuning_table.md). No GPU needed.\n"
    "\n"
    "commands:\n"
    "  validate FILE...     check each table against the schema and the kernels compiled\n"
    "                       into this library; prints 'FILE: ok' or the reason it is not\n"
    "  show [FILE]          the built-in table, or FILE, as a text table (fwd and bwd\n"
    "                       entries)\n"
    "  kernels              the kernels compiled into this library, forward then\n"
    "                       backward, each with what every part of its name means\n"
    "  explain NAME         what each part of a forward or backward kernel name means\n"
    "                       (compiled or not), or why it is not a kernel name\n"
    "  tokens [--markdown]  every name token: the option it sets, its value in a tuning\n"
    "                       table's config, its meaning, whether it is lab-only (--markdown:\n"
    "                       the table of docs/tuning_table.md)\n"
    "  select [--direction fwd|bwd] --dtype f16|bf16 --head-dim D [--causal]\n"
    "         --seqlen-q N --seqlen-k N [--table FILE]\n"
    "                       the kernel the built-in table (or FILE) picks for that\n"
    "                       problem (default: forward); for a backward key the table has\n"
    "                       no entries for, the first compiled backward kernel that fits\n"
    "  --help               this text\n"
    "\n"
    "exit status: 0 success; 1 a table is invalid or has no entry for the problem, or\n"
    "explain's NAME is not a kernel name; 2 bad usage\n";

int usage_error(const std::string& sentence) {
  std::fprintf(stderr, "fa3-table: %s\nrun 'fa3-table --help' for usage\n", sentence.c_str());
  return kExitUsage;
}

int load_failed(const fa3::Error& e) {
  std::fprintf(stderr, "%s\n", e.message.c_str());
  return kExitFailed;
}

// Rows of cells as lines, left-aligned in columns two spaces apart.
std::vector<std::string> column_lines(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::vector<std::string> lines;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);  // an empty last cell leaves no padding
    lines.push_back(line);
  }
  return lines;
}

void print_columns(const std::vector<std::vector<std::string>>& rows) {
  for (const std::string& line : column_lines(rows)) std::printf("%s\n", line.c_str());
}

// ---- validate ---------------------------------------------------------------------------

int validate_files(const std::vector<std::string>& files) {
  if (files.empty()) return usage_error("validate needs at least one FILE");
  int failures = 0;
  for (const std::string& file : files) {
    if (fa3_tuning_table_validate(file.c_str()) == FA3_OK) {
      std::printf("%s: ok\n", file.c_str());
    } else {
      std::printf("%s\n", fa3_last_error());
      ++failures;
    }
  }
  return failures ? kExitFailed : 0;
}

// ---- show -------------------------------------------------------------------------------

std::string range_text(const fa3::SeqlenRange& r) {
  return "[" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]";
}

// Entries grouped by key, each key's entries in seqlen order: how a reader looks one up.
std::vector<fa3::TuningEntry> in_reading_order(std::vector<fa3::TuningEntry> entries) {
  auto order = [](const fa3::TuningEntry& e) {
    return std::make_tuple(static_cast<int>(e.key.direction), static_cast<int>(e.key.dtype),
                           e.key.head_dim, e.key.causal, e.seqlen_q.lo, e.seqlen_k.lo);
  };
  std::sort(
      entries.begin(), entries.end(),
      [&](const fa3::TuningEntry& a, const fa3::TuningEntry& b) { return order(a) < order(b); });
  return entries;
}

int show_table(const std::vector<std::string>& args) {
  if (args.size() > 1) return usage_error("show takes at most one FILE");
  TuningTable table;
  const fa3::Error e = args.empty()
                           ? TuningTable::load_builtin(&table)
                           : TuningTable::load_file(args[0], fa3::compiled_forward_and_backward_kernels(), &table);
  if (e.failed()) return load_failed(e);

  std::printf("tuning table '%s': %zu entries\n", table.source().c_str(), table.entries().size());
  for (const auto& [key, value] : table.info())
    std::printf("  %s: %s\n", key.c_str(), value.c_str());
  std::printf("\n");
  std::vector<std::vector<std::string>> rows = {{"key", "seqlen_q", "seqlen_k", "kernel"}};
  for (const fa3::TuningEntry& entry : in_reading_order(table.entries()))
    rows.push_back({fa3::describe(entry.key), range_text(entry.seqlen_q),
                    range_text(entry.seqlen_k), entry.kernel.name});
  print_columns(rows);
  return 0;
}

// ---- kernels, explain, tokens ------------------------------------------------------------

// One row per part of a name: its tokens, the value they set, the meaning, a lab-only mark.
// Options at their default (spelled by nothing) only with `defaults`.
std::vector<std::vector<std::string>> part_rows(const std::vector<fa3::NamePart>& parts,
                                                bool defaults) {
  std::vector<std::vector<std::string>> rows;
  for (const fa3::NamePart& p : parts) {
    if (p.tokens.empty() && !defaults) continue;
    rows.push_back({"  " + (p.tokens.empty() ? std::string("(default)") : p.tokens),
                    p.field + " = " + p.value, p.meaning, p.lab_only ? "lab only" : ""});
  }
  return rows;
}

// A kernel name's parts, by the grammar of its direction.
std::vector<fa3::NamePart> explain_kernel_name(const std::string& name) {
  return name.rfind("fa3_bwd_", 0) == 0 ? fa3::explain_bwd_kernel_name(name)
                                        : fa3::explain_fwd_kernel_name(name);
}

int list_kernels(const std::vector<std::string>& args) {
  if (!args.empty()) return usage_error("kernels takes no arguments");
  const std::vector<const fa3::KernelInfo*>& kernels = fa3::all_compiled_kernels();
  if (kernels.empty()) {
    std::printf("no kernels are compiled into this library\n");
    return 0;
  }
  // The parts of every kernel in one set of columns, so that the kernels read as one table;
  // each kernel's name on a line of its own above its parts.
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> first_row;
  for (const fa3::KernelInfo* k : kernels) {
    first_row.push_back(rows.size());
    for (std::vector<std::string>& row : part_rows(explain_kernel_name(k->name), false))
      rows.push_back(std::move(row));
  }
  const std::vector<std::string> lines = column_lines(rows);
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::printf("%s\n", kernels[k]->name.c_str());
    const size_t end = k + 1 < kernels.size() ? first_row[k + 1] : lines.size();
    for (size_t i = first_row[k]; i < end; ++i) std::printf("%s\n", lines[i].c_str());
  }
  return 0;
}

int explain_name(const std::vector<std::string>& args) {
  if (args.size() != 1) return usage_error("explain takes one NAME");
  const std::string& name = args[0];
  std::string why;
  const bool backward = name.rfind("fa3_bwd_", 0) == 0;
  if (backward ? !fa3::parse_bwd_kernel_name(name, &why) : !fa3::parse_fwd_kernel_name(name, &why)) {
    std::fprintf(stderr, "%s is not a %s kernel name: %s\n", name.c_str(),
                 backward ? "backward" : "forward", why.c_str());
    return kExitFailed;
  }
  std::printf("%s: %s\n", name.c_str(),
              fa3::find_any_compiled_kernel(name) ? "compiled into this library"
                                                  : "a valid config, not compiled into this library");
  print_columns(part_rows(explain_kernel_name(name), true));
  return 0;
}

int list_tokens(const std::vector<std::string>& args) {
  if (args.size() == 1 && args[0] == "--markdown") {
    std::fputs(fa3::fwd_tokens_markdown().c_str(), stdout);
    return 0;
  }
  if (!args.empty()) return usage_error("tokens takes only --markdown");
  std::string grammar = "fa3_fwd_<f16|bf16>";
  for (const fa3::FwdNumber& n : fa3::kFwdNumbers)
    grammar += std::string("_") + n.prefix + "<" + n.key + ">";
  std::printf("%s[_<option>...], the options in this order:\n\n", grammar.c_str());
  std::vector<std::vector<std::string>> rows = {{"tokens", "config", "meaning", ""}};
  for (const fa3::FwdOption& o : fa3::kFwdOptions) {
    for (int i = 0; i < o.count; ++i) {
      const fa3::FwdSpelling& s = o.spellings[i];
      fa3::FwdConfig c;
      fa3::set_fwd_field(c, o.field, s.value);
      const bool is_default = i == 0;
      rows.push_back({is_default ? "(default)" : s.tokens,
                      std::string(o.key) + " = " + fa3::fwd_option_value_word(c, o), s.meaning,
                      o.lab_only && !is_default ? "lab only" : ""});
    }
  }
  print_columns(rows);
  return 0;
}

// ---- select -----------------------------------------------------------------------------

// A decimal integer >= 1 with nothing around it; nullopt otherwise.
std::optional<int64_t> positive_integer(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int64_t value = std::strtoll(text.c_str(), nullptr, 10);
  if (value < 1) return std::nullopt;
  return value;
}

struct SelectArgs {
  std::optional<std::string> direction, dtype, head_dim, seqlen_q, seqlen_k, table;
  bool causal = false;
};

// Fills *out from "--name value" pairs and "--causal"; an error sentence on bad usage.
std::optional<std::string> read_select_args(const std::vector<std::string>& args, SelectArgs* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--causal") {
      out->causal = true;
      continue;
    }
    std::optional<std::string>* slot = flag == "--direction"  ? &out->direction
                                       : flag == "--dtype"      ? &out->dtype
                                       : flag == "--head-dim" ? &out->head_dim
                                       : flag == "--seqlen-q" ? &out->seqlen_q
                                       : flag == "--seqlen-k" ? &out->seqlen_k
                                       : flag == "--table"    ? &out->table
                                                              : nullptr;
    if (!slot) return "select: unknown argument '" + flag + "'";
    if (i + 1 == args.size()) return "select: " + flag + " needs a value";
    *slot = args[++i];
  }
  for (const auto& [value, flag] :
       {std::make_pair(&out->dtype, "--dtype"), std::make_pair(&out->head_dim, "--head-dim"),
        std::make_pair(&out->seqlen_q, "--seqlen-q"), std::make_pair(&out->seqlen_k, "--seqlen-k")})
    if (!*value) return std::string("select: ") + flag + " is required";
  return std::nullopt;
}

int select_kernel(const std::vector<std::string>& args) {
  SelectArgs a;
  if (const std::optional<std::string> problem = read_select_args(args, &a))
    return usage_error(*problem);

  fa3::ProblemKey key{fa3::Direction::Forward, fa3::DType::BF16, 0, a.causal, 0, 0};
  if (a.direction && *a.direction == "bwd")
    key.direction = fa3::Direction::Backward;
  else if (a.direction && *a.direction != "fwd")
    return usage_error("select: --direction must be fwd or bwd (got '" + *a.direction + "')");
  if (*a.dtype == "f16")
    key.dtype = fa3::DType::F16;
  else if (*a.dtype != "bf16")
    return usage_error("select: --dtype must be f16 or bf16 (got '" + *a.dtype + "')");
  const std::optional<int64_t> head_dim = positive_integer(*a.head_dim);
  const std::optional<int64_t> seqlen_q = positive_integer(*a.seqlen_q);
  const std::optional<int64_t> seqlen_k = positive_integer(*a.seqlen_k);
  if (!head_dim || *head_dim > INT_MAX)
    return usage_error("select: --head-dim must be a positive integer (got '" + *a.head_dim + "')");
  if (!seqlen_q)
    return usage_error("select: --seqlen-q must be a positive integer (got '" + *a.seqlen_q + "')");
  if (!seqlen_k)
    return usage_error("select: --seqlen-k must be a positive integer (got '" + *a.seqlen_k + "')");
  key.head_dim = static_cast<int>(*head_dim);
  key.seqlen_q = *seqlen_q;
  key.seqlen_k = *seqlen_k;

  TuningTable table;
  const fa3::Error e =
      a.table ? TuningTable::load_file(*a.table, fa3::compiled_forward_and_backward_kernels(), &table)
              : TuningTable::load_builtin(&table);
  if (e.failed()) return load_failed(e);
  const fa3::KernelInfo* kernel = table.select(key);
  if (!kernel && key.direction == fa3::Direction::Backward) {
    // No bwd entry for the key: a backward call runs the first compiled kernel that fits.
    fa3::BackwardProblem problem;
    problem.dtype = key.dtype;
    problem.head_dim = key.head_dim;
    problem.causal = key.causal;
    if (!fa3::select_backward_kernel(fa3::compiled_backward_kernels(), problem, &kernel).failed())
      std::fprintf(stderr, "tuning table '%s' has no entry for %s: a backward call runs the "
                   "first compiled kernel that fits\n", table.source().c_str(),
                   fa3::describe({key.direction, key.dtype, key.head_dim, key.causal}).c_str());
  }
  if (!kernel) {
    // A valid table covers every supported key, so only an unsupported problem gets here.
    std::fprintf(stderr, "tuning table '%s' has no entry for %s at seqlen_q=%lld, seqlen_k=%lld\n",
                 table.source().c_str(),
                 fa3::describe({key.direction, key.dtype, key.head_dim, key.causal}).c_str(),
                 static_cast<long long>(key.seqlen_q), static_cast<long long>(key.seqlen_k));
    return kExitFailed;
  }
  std::printf("%s\n", kernel->name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> words(argv + 1, argv + argc);
  if (std::find_if(words.begin(), words.end(), [](const std::string& w) {
        return w == "--help" || w == "-h";
      }) != words.end()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (words.empty()) return usage_error("missing COMMAND");
  const std::string& command = words[0];
  const std::vector<std::string> args(words.begin() + 1, words.end());
  if (command == "validate") return validate_files(args);
  if (command == "show") return show_table(args);
  if (command == "kernels") return list_kernels(args);
  if (command == "explain") return explain_name(args);
  if (command == "tokens") return list_tokens(args);
  if (command == "select") return select_kernel(args);
  return usage_error("unknown command '" + command + "'");
}
