// The table fa3-tune writes: the measured keys' ranges plus, for keys a filtered run did not
// measure and for every key of the other direction, the current table's entries, in the
// library's schema (docs/tuning_table.md), with each entry's config from fwd_config_json or
// bwd_config_json. Validated with TuningTable::parse before it is written. Pure host code.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/tuning_table.h"
#include "tune_plan.h"

namespace fa3tune {

// One key this run measured, with its merged ranges over seqlen_q (key_ranges).
struct MeasuredKey {
  fa3::MatchKey key{};
  std::vector<KernelRange> ranges;
};

// The table's "info" values of this run (every value a string). A forward run writes them as
// gpu, date, generated_by and notes; a backward run as bwd_gpu, bwd_date, bwd_generated_by
// and bwd_notes. The other direction's values are kept from the current table (its keys that
// start with "bwd_" belong to the backward, the others to the forward).
struct TableInfo {
  std::string gpu;           // cudaGetDeviceProperties' name
  std::string date;          // UTC, ISO 8601: "2026-11-22"
  std::string generated_by;  // "fa3-tune" and the command line's arguments
  std::string notes;         // method_notes
  fa3::Direction direction = fa3::Direction::Forward;  // the direction this run measured
};

// The keys of all_keys(direction) that `measured` does not contain, in all_keys() order.
std::vector<fa3::MatchKey> unmeasured_keys(const std::vector<MeasuredKey>& measured,
                                           fa3::Direction direction = fa3::Direction::Forward);

// The table: for every key of all_keys(Forward), then of all_keys(Backward), in order, the
// measured ranges (seqlen_k [1, max] each) or else the entries `current` has for the key (in
// seqlen order; a backward key `current` has none for gets none). Every entry gets its
// kernel's config (fwd_config_json / bwd_config_json) from `kernels`; a kernel missing from
// `kernels` gets none (validation then names it).
nlohmann::ordered_json tuning_table_json(const std::vector<MeasuredKey>& measured,
                                         const fa3::TuningTable& current,
                                         const std::vector<fa3::KernelInfo>& kernels,
                                         const TableInfo& info);

// The JSON text in the built-in table's layout: one line per entry's match, kernel and
// config, ending with a newline.
std::string table_text(const nlohmann::ordered_json& table);

// TuningTable::parse of `text` against `kernels`, with `source` naming it in the message.
fa3::Error validate_table(const std::string& text, const std::string& source,
                          const std::vector<fa3::KernelInfo>& kernels);

// How the table was measured, for info.notes: the method, the buckets, and which keys were
// kept from the current table (when any were not measured).
struct MethodSummary {
  bool quick = false;
  int warmup = 0, iters = 0, rounds = 1;
  double cooldown = 0;
  std::vector<SeqlenBucket> buckets;
  std::vector<fa3::MatchKey> kept_keys;  // unmeasured_keys
  std::string kept_from = "the built-in table";
  fa3::Direction direction = fa3::Direction::Forward;
};
std::string method_notes(const MethodSummary& summary);

// "2026-11-22": the UTC date of `t`.
std::string utc_date(std::time_t t);

// "fa3-tune --quick --out t.json": the program's name and the arguments after argv[0]
// (without the build path a user happened to run it by); bytes outside printable ASCII
// become '?', so the JSON text stays valid UTF-8.
std::string generated_by(int argc, const char* const* argv);
// s with every byte outside printable ASCII replaced by '?': JSON strings must be valid
// UTF-8 (nlohmann's dump throws otherwise), and a command line or a path need not be.
std::string printable_ascii(std::string s);

}  // namespace fa3tune
