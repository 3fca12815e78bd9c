// The tuning table: which compiled kernel runs each problem. A JSON document (schema and
// rules in docs/tuning_table.md) that is validated completely when it is loaded, then
// indexed so that picking a kernel on the hot path is a short scan without allocation.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/kernel_registry.h"

namespace fa3 {

// A problem as the tuning table sees it.
struct ProblemKey {
  Direction direction;
  DType dtype;
  int head_dim;
  bool causal;
  int64_t seqlen_q, seqlen_k;
};

// The part of a problem an entry matches exactly (everything but the sequence lengths).
struct MatchKey {
  Direction direction;
  DType dtype;
  int head_dim;
  bool causal;
};

// "fwd" / "bwd": the direction as a table's match writes it.
const char* direction_name(Direction direction);

// "fwd bf16 head_dim 128 causal" / "bwd f16 head_dim 64 non-causal": how messages and
// fa3-table name a key.
std::string describe(const MatchKey& key);

// An inclusive range of sequence lengths.
struct SeqlenRange {
  int64_t lo, hi;
  bool contains(int64_t seqlen) const { return lo <= seqlen && seqlen <= hi; }
};

struct TuningEntry {
  MatchKey key;
  SeqlenRange seqlen_q, seqlen_k;
  KernelInfo kernel;  // a copy: the table does not depend on the list it was checked against
};

// The "config" object of a forward kernel in a tuning table. The one place the mapping
// between FwdConfig and JSON is written: validation checks an entry's config against it and
// fa3-table prints it, so a new FwdConfig field is added here and nowhere else.
nlohmann::ordered_json fwd_config_json(const FwdConfig& config);
// The same for a backward kernel: its numbers, the splits of dK/dV and of dQ between the
// consumer warpgroups (the name's _kvh, _dqh, _dqq) and the mask.
nlohmann::ordered_json bwd_config_json(const BwdConfig& config);

// Which backward keys a table must cover. Every forward key must always be covered (each
// forward call runs the table's pick). A backward key the table has entries for must be
// covered completely by them; one without entries runs the first compiled backward kernel
// that fits (select_backward_kernel), so a user's table needs none (Optional). The built-in
// table must cover all 12 (Required).
enum class BackwardCoverage { Optional, Required };

// The text of the table built into the library (src/runtime/tuning_table.json).
std::string builtin_tuning_table_text();

class TuningTable {
 public:
  // Validates `json_text` against the schema and against `kernels` (the kernels that exist,
  // forward and backward: tests pass their own lists, the library passes
  // compiled_forward_and_backward_kernels()). `source` names the
  // table in error messages. On failure *out is left unchanged and the Error's message is
  // one sentence naming the source, the entry and the reason. Any bytes are safe to pass:
  // a text over 1 MiB or nested deeper than 64 levels is an error like any other, and no
  // input crashes, throws (short of std::bad_alloc) or takes more than quadratic time in the
  // number of entries.
  static Error parse(const std::string& json_text, const std::string& source,
                     const std::vector<KernelInfo>& kernels, TuningTable* out,
                     BackwardCoverage backward = BackwardCoverage::Optional);
  static Error load_file(const std::string& path, const std::vector<KernelInfo>& kernels,
                         TuningTable* out);
  // The built-in table against compiled_forward_and_backward_kernels(), with source
  // "built-in", covering every backward key (BackwardCoverage::Required).
  static Error load_builtin(TuningTable* out);

  // The kernel for this problem; nullptr when no entry matches (an unsupported dtype or
  // head_dim, a sequence length outside [1, 2147483647], or a backward key the table has no
  // entries for). Safe to call from several threads at once.
  const KernelInfo* select(const ProblemKey& problem) const;

  const std::string& source() const { return source_; }
  // The free-form "info" strings, in document order.
  const std::vector<std::pair<std::string, std::string>>& info() const { return info_; }
  // The entries in document order.
  const std::vector<TuningEntry>& entries() const { return entries_; }

 private:
  // One slot per supported (direction, dtype, head_dim, causal): 2 x 2 x 3 x 2.
  static constexpr int kSlotCount = 24;
  struct Rule {
    SeqlenRange seqlen_q, seqlen_k;
    size_t entry;  // index into entries_ (not a pointer, so copies of the table stay valid)
  };

  void build_index();

  std::string source_;
  std::vector<std::pair<std::string, std::string>> info_;
  std::vector<TuningEntry> entries_;
  std::array<std::vector<Rule>, kSlotCount> slots_;
};

}  // namespace fa3
