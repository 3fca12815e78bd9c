#include "tune_table.h"

#include <algorithm>
#include <cstdio>

namespace fa3tune {

using Json = nlohmann::ordered_json;

std::vector<fa3::MatchKey> unmeasured_keys(const std::vector<MeasuredKey>& measured,
                                           fa3::Direction direction) {
  std::vector<fa3::MatchKey> keys;
  for (const fa3::MatchKey& key : all_keys(direction)) {
    bool found = false;
    for (const MeasuredKey& m : measured) found = found || same_key(m.key, key);
    if (!found) keys.push_back(key);
  }
  return keys;
}

namespace {

const fa3::KernelInfo* find_kernel(const std::vector<fa3::KernelInfo>& kernels,
                                   const std::string& name) {
  for (const fa3::KernelInfo& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

Json entry_json(const fa3::MatchKey& key, fa3::SeqlenRange seqlen_q, fa3::SeqlenRange seqlen_k,
                const std::string& kernel, const std::vector<fa3::KernelInfo>& kernels) {
  Json match = {{"direction", fa3::direction_name(key.direction)},
                {"dtype", fa3::dtype_name(key.dtype)},
                {"head_dim", key.head_dim},
                {"causal", key.causal},
                {"seqlen_q", {seqlen_q.lo, seqlen_q.hi}},
                {"seqlen_k", {seqlen_k.lo, seqlen_k.hi}}};
  Json entry = {{"match", match}, {"kernel", kernel}};
  if (const fa3::KernelInfo* k = find_kernel(kernels, kernel))
    entry["config"] = k->direction == fa3::Direction::Backward ? fa3::bwd_config_json(k->bwd)
                                                               : fa3::fwd_config_json(k->fwd);
  return entry;
}

bool is_backward_info(const std::string& key) { return key.rfind("bwd_", 0) == 0; }

// The run's info values under its direction's keys, after (backward run) or before (forward
// run) the other direction's values kept from `current`.
Json info_json(const TableInfo& info, const fa3::TuningTable& current) {
  const bool backward = info.direction == fa3::Direction::Backward;
  const std::string prefix = backward ? "bwd_" : "";
  Json run = {{prefix + "gpu", info.gpu},
              {prefix + "date", info.date},
              {prefix + "generated_by", info.generated_by},
              {prefix + "notes", info.notes}};
  Json kept = Json::object();
  for (const auto& [key, value] : current.info())
    if (is_backward_info(key) != backward) kept[key] = value;
  Json out = backward ? kept : run;
  for (const auto& item : (backward ? run : kept).items()) out[item.key()] = item.value();
  return out;
}

}  // namespace

Json tuning_table_json(const std::vector<MeasuredKey>& measured, const fa3::TuningTable& current,
                       const std::vector<fa3::KernelInfo>& kernels, const TableInfo& info) {
  const fa3::SeqlenRange every_length{1, kMaxSeqlen};
  Json entries = Json::array();
  std::vector<fa3::MatchKey> keys = all_keys(fa3::Direction::Forward);
  for (const fa3::MatchKey& key : all_keys(fa3::Direction::Backward)) keys.push_back(key);
  for (const fa3::MatchKey& key : keys) {
    const MeasuredKey* m = nullptr;
    for (const MeasuredKey& candidate : measured)
      if (same_key(candidate.key, key)) m = &candidate;
    if (m) {
      for (const KernelRange& r : m->ranges)
        entries.push_back(entry_json(key, {r.lo, r.hi}, every_length, r.kernel, kernels));
      continue;
    }
    std::vector<fa3::TuningEntry> kept;
    for (const fa3::TuningEntry& e : current.entries())
      if (same_key(e.key, key)) kept.push_back(e);
    std::stable_sort(kept.begin(), kept.end(), [](const fa3::TuningEntry& a, const fa3::TuningEntry& b) {
      return a.seqlen_q.lo != b.seqlen_q.lo ? a.seqlen_q.lo < b.seqlen_q.lo
                                            : a.seqlen_k.lo < b.seqlen_k.lo;
    });
    for (const fa3::TuningEntry& e : kept)
      entries.push_back(entry_json(key, e.seqlen_q, e.seqlen_k, e.kernel.name, kernels));
  }
  return Json{{"version", 1},
              {"arch", "sm_90a"},
              {"info", info_json(info, current)},
              {"entries", entries}};
}

namespace {

// Objects and arrays on one line with ", " and ": " between items, as people write them.
std::string one_line(const Json& v) {
  std::string s;
  if (v.is_object()) {
    for (const auto& item : v.items())
      s += (s.empty() ? "" : ", ") + Json(item.key()).dump() + ": " + one_line(item.value());
    return "{" + s + "}";
  }
  if (v.is_array()) {
    for (const Json& x : v) s += (s.empty() ? "" : ", ") + one_line(x);
    return "[" + s + "]";
  }
  return v.dump();
}

}  // namespace

std::string table_text(const Json& table) {
  std::string out = "{\n";
  bool first_key = true;
  for (const auto& item : table.items()) {
    out += first_key ? "" : ",\n";
    first_key = false;
    out += "  " + Json(item.key()).dump() + ": ";
    const Json& v = item.value();
    if (item.key() == "entries" && v.is_array()) {
      out += "[\n";
      for (size_t i = 0; i < v.size(); ++i) {
        out += "    {\n";
        bool first_field = true;
        for (const auto& field : v[i].items()) {
          out += first_field ? "" : ",\n";
          first_field = false;
          out += "      " + Json(field.key()).dump() + ": " + one_line(field.value());
        }
        out += std::string("\n    }") + (i + 1 < v.size() ? "," : "") + "\n";
      }
      out += "  ]";
    } else if (v.is_object() && !v.empty()) {
      out += "{\n";
      bool first_field = true;
      for (const auto& field : v.items()) {
        out += first_field ? "" : ",\n";
        first_field = false;
        out += "    " + Json(field.key()).dump() + ": " + one_line(field.value());
      }
      out += "\n  }";
    } else {
      out += one_line(v);
    }
  }
  return out + "\n}\n";
}

fa3::Error validate_table(const std::string& text, const std::string& source,
                          const std::vector<fa3::KernelInfo>& kernels) {
  fa3::TuningTable parsed;
  return fa3::TuningTable::parse(text, source, kernels, &parsed);
}

namespace {

std::string bucket_list(const std::vector<SeqlenBucket>& buckets) {
  std::string s;
  for (const SeqlenBucket& b : buckets)
    s += (s.empty() ? "" : ", ") + std::string("[") + std::to_string(b.lo) + ", " +
         std::to_string(b.hi) + "] at " + std::to_string(b.measured_at);
  return s;
}

// 1 -> "1", 0.5 -> "0.5", 2.25 -> "2.25".
std::string cooldown_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

}  // namespace

std::string method_notes(const MethodSummary& s) {
  const bool backward = s.direction == fa3::Direction::Backward;
  const std::string check =
      backward ? "was first checked against a float64 backward reference on sampled rows (dQ, "
                 "dK and dV error each <= 2 x the plain same-precision backward's + 1e-5), "
                 "then its fa3_backward_with_kernel calls timed with CUDA events "
               : "was first checked against a float64 reference on sampled rows, with "
                 "and without an LSE buffer (O error <= 2 x plain same-precision attention's + "
                 "1e-5, LSE error <= 1e-4), then timed with CUDA events ";
  std::string notes =
      "Measured by fa3-tune" + std::string(backward ? " --direction bwd" : "") +
      std::string(s.quick ? " --quick" : "") + " with fa3-bench's method: every compiled " +
      (backward ? "backward " : "") +
      "kernel that fits a key, on the paper's grid "
      "shape (seqlen_q = seqlen_k = S, batch = 16384/S, heads = 2048/head_dim, inputs "
      "normal(0, 1)), " + check + "around each launch, " +
      std::to_string(s.warmup) + " warm-up + " + std::to_string(s.iters) +
      " timed launches" +
      (s.rounds > 1 ? " in each of " + std::to_string(s.rounds) +
                          " rounds interleaved over the kernels (a kernel's figure: the median "
                          "of its rounds' medians)"
                    : std::string()) +
      (s.cooldown > 0 ? ", each kernel's launches followed by " + cooldown_text(s.cooldown) +
                            " x their time with the GPU idle"
                      : std::string()) +
      ", inputs rotated over buffer sets >= 3 x L2; the fastest median among "
      "the kernels that passed wins. seqlen_q buckets (measured at S): " +
      bucket_list(s.buckets) +
      "; neighbouring buckets with the same winner are merged. seqlen_k is not tuned "
      "separately (only square problems are measured): every measured entry covers seqlen_k "
      "[1, 2147483647].";
  if (!s.kept_keys.empty()) {
    std::string kept;
    for (const fa3::MatchKey& key : s.kept_keys) kept += (kept.empty() ? "" : ", ") + key_label(key);
    notes += " Not measured in this run (filters), entries kept from " + s.kept_from + ": " +
             kept + ".";
  }
  return notes;
}

std::string utc_date(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

std::string printable_ascii(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return s;
}

std::string generated_by(int argc, const char* const* argv) {
  std::string s = "fa3-tune";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return printable_ascii(s);
}

}  // namespace fa3tune
