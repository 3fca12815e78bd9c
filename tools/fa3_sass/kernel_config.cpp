#include "kernel_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace fa3::sass {

namespace {

struct CheckInfo {
  CheckId id;
  const char* name;
  const char* title;
};

const CheckInfo kChecks[] = {
    {CheckId::NoSpills, "no_spills", "no local-memory spills (LDL/STL, stack, local)"},
    {CheckId::SetMaxReg, "setmaxnreg", "setmaxnreg in the warp-specialized kernel (USETMAXREG)"},
    {CheckId::TmaLoads, "tma_loads", "TMA loads present (UTMALDG)"},
    {CheckId::WgmmaUsed, "wgmma_used", "tensor cores through wgmma (HGMMA/QGMMA), not HMMA"},
    {CheckId::WgmmaNotSerialized, "wgmma_not_serialized", "wgmma not serialized (no wait after every HGMMA)"},
    {CheckId::UniformOperands, "uniform_operands",
     "wgmma descriptors in the uniform datapath: none moved in (R2UR) from per-thread mainloop math"},
    {CheckId::Fp8UsesQgmma, "fp8_qgmma", "fp8 kernel uses QGMMA"},
    {CheckId::TwoStagePipeline, "two_stage_pipeline",
     "2-stage pipelining (B.2): softmax first, WGMMA 1 interleaved, WGMMA 2 packed"},
    {CheckId::GemmSoftmaxOverlap, "gemm_softmax_overlap",
     "GEMM-softmax pipelining: row max / exp2 run while a WGMMA group is in flight"},
    {CheckId::TmaMulticast, "tma_multicast",
     "2-CTA cluster: K/V loaded by TMA multicast, no GPU-scope MEMBAR in the mainloop"},
    {CheckId::HalfBlocks, "half_blocks",
     "half-width blocks: a QK^T group of N = block_n/2 and a PV group of block_n/32 k-steps"},
};

const CheckInfo& info(CheckId id) {
  for (const CheckInfo& c : kChecks)
    if (c.id == id) return c;
  return kChecks[0];
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

// ---- name grammar: one table row per token kind, so a new token is one line ----------

// Directions built on wgmma, with a producer warpgroup (paper Algorithms 1 and 3).
struct DirectionInfo {
  const char* token;
  bool matrix_kernel;
  bool warp_specialized;
};
const DirectionInfo kDirections[] = {
    {"fwd", true, true},
    {"bwd", true, true},
};

struct DtypeInfo {
  const char* token;
  bool fp8;
};
const DtypeInfo kDtypes[] = {{"f16", false}, {"bf16", false}, {"e4m3", true}, {"e5m2", true}};

struct NumberToken {
  char prefix;
  std::optional<int> KernelTraits::*field;
};
const NumberToken kNumbers[] = {
    {'d', &KernelTraits::head_dim},
    {'m', &KernelTraits::block_m},
    {'n', &KernelTraits::block_n},
    {'s', &KernelTraits::stages},
    {'w', &KernelTraits::consumer_warpgroups},
};

struct FlagToken {
  const char* token;
  bool KernelTraits::*field;
};
const FlagToken kFlags[] = {
    {"causal", &KernelTraits::causal},
    {"ov", &KernelTraits::overlap},
    {"ov3", &KernelTraits::three_stage},
    {"p2", &KernelTraits::double_p},
    {"b2", &KernelTraits::b2_order},
    {"cr", &KernelTraits::conditional_rescale},
    {"im", &KernelTraits::int_max},
    {"ew", &KernelTraits::exp_after_pv_wait},
    {"as", &KernelTraits::ascending},
    {"hb", &KernelTraits::half_blocks},
    {"ls", &KernelTraits::row_sum_mma},
    {"pp", &KernelTraits::pingpong},
    {"ps", &KernelTraits::persistent},
    {"xt", &KernelTraits::cross_tile},
    {"qw", &KernelTraits::q_warp},
    {"q3", &KernelTraits::three_q_buffers},
    {"os", &KernelTraits::q_warp_stores_o},
    {"dy", &KernelTraits::dynamic_schedule},
    {"qr", &KernelTraits::q_in_registers},
    {"ef", &KernelTraits::evict_first_q_o},
    {"el", &KernelTraits::evict_last_kv},
    {"c2", &KernelTraits::cluster},
    {"nows", &KernelTraits::no_warp_specialization},
};

std::optional<int> number_after(const std::string& token, char prefix) {
  if (token.size() < 2 || token.size() > 6 || token[0] != prefix) return std::nullopt;
  int value = 0;
  for (size_t i = 1; i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return std::nullopt;
    value = value * 10 + (token[i] - '0');
  }
  return value;
}

bool apply_token(KernelTraits& t, const std::string& token) {
  for (const DtypeInfo& d : kDtypes) {
    if (token == d.token && t.dtype.empty()) {
      t.dtype = token;
      t.fp8 = d.fp8;
      return true;
    }
  }
  for (const NumberToken& n : kNumbers) {
    if (auto value = number_after(token, n.prefix); value && !(t.*n.field)) {
      t.*n.field = value;
      return true;
    }
  }
  for (const FlagToken& f : kFlags) {
    if (token == f.token) {
      t.*f.field = true;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* check_name(CheckId id) { return info(id).name; }
const char* check_title(CheckId id) { return info(id).title; }

std::optional<CheckId> check_from_name(const std::string& name) {
  for (const CheckInfo& c : kChecks)
    if (name == c.name) return c.id;
  return std::nullopt;
}

const std::vector<CheckId>& all_checks() {
  static const std::vector<CheckId> ids = [] {
    std::vector<CheckId> v;
    for (const CheckInfo& c : kChecks) v.push_back(c.id);
    return v;
  }();
  return ids;
}

KernelTraits traits_from_name(const std::string& kernel_name) {
  KernelTraits t;
  const std::vector<std::string> tokens = split(kernel_name, '_');
  if (tokens.size() < 2 || tokens[0] != "fa3") return t;
  t.fa3_name = true;
  t.direction = tokens[1];
  for (const DirectionInfo& d : kDirections) {
    if (t.direction == d.token) {
      t.matrix_kernel = d.matrix_kernel;
      t.warp_specialized = d.warp_specialized;
    }
  }
  for (size_t i = 2; i < tokens.size(); ++i)
    if (!apply_token(t, tokens[i])) t.unknown_tokens.push_back(tokens[i]);
  return t;
}

std::vector<CheckId> checks_for(const KernelTraits& t) {
  // Rules, not a table of names: a kernel gets every check its traits call for.
  const std::vector<std::pair<CheckId, bool>> rules = {
      {CheckId::NoSpills, true},
      {CheckId::SetMaxReg, t.warp_specialized && !t.no_warp_specialization},
      {CheckId::TmaLoads, t.warp_specialized},
      {CheckId::WgmmaUsed, t.matrix_kernel},
      // A kernel we know nothing about may still use wgmma; serialization is never wanted.
      {CheckId::WgmmaNotSerialized, t.matrix_kernel || !t.fa3_name},
      {CheckId::UniformOperands, t.matrix_kernel},
      {CheckId::Fp8UsesQgmma, t.matrix_kernel && t.fp8},
      // The B.2 layout for the kernels built in B.2's order; the overlap itself for the other
      // pipelined forms (Algorithm 2 as written, two P buffers, Algorithm 4).
      {CheckId::TwoStagePipeline, t.matrix_kernel && t.overlap && t.b2_order},
      {CheckId::GemmSoftmaxOverlap, t.matrix_kernel && (t.overlap || t.three_stage) && !t.b2_order},
      {CheckId::TmaMulticast, t.cluster},
      {CheckId::HalfBlocks, t.matrix_kernel && t.half_blocks},
  };
  std::vector<CheckId> out;
  for (const auto& [id, applies] : rules)
    if (applies) out.push_back(id);
  return out;
}

std::string describe(const KernelTraits& t) {
  if (!t.fa3_name) return "not an fa3 kernel name: generic checks only";
  std::string s = t.direction;
  if (!t.dtype.empty()) s += " " + t.dtype;
  const std::pair<char, std::optional<int>> numbers[] = {
      {'d', t.head_dim}, {'m', t.block_m}, {'n', t.block_n}, {'s', t.stages}, {'w', t.consumer_warpgroups}};
  for (const auto& [prefix, value] : numbers)
    if (value) s += std::string(" ") + prefix + std::to_string(*value);
  if (t.causal) s += ", causal";
  if (t.overlap) s += ", 2-stage overlap";
  if (t.three_stage) s += ", 3-stage overlap";
  if (t.double_p) s += ", two P buffers";
  if (t.b2_order) s += ", B.2 order";
  if (t.conditional_rescale) s += ", conditional O rescale";
  if (t.int_max) s += ", row max by integer max";
  if (t.exp_after_pv_wait) s += ", exponentials after the PV wait";
  if (t.ascending) s += ", ascending key blocks";
  if (t.pingpong) s += ", pingpong";
  if (t.persistent) s += ", persistent";
  if (t.cross_tile) s += ", cross-tile pipelining";
  if (t.q_warp) s += ", Q warp";
  if (t.three_q_buffers) s += ", three Q buffers";
  if (t.q_warp_stores_o) s += ", O stored by the Q warp";
  if (t.dynamic_schedule) s += ", tiles from a counter";
  if (t.q_in_registers) s += ", QK^T with Q from registers";
  if (t.evict_first_q_o) s += ", Q and O evict-first in L2";
  if (t.evict_last_kv) s += ", K and V evict-last in L2";
  if (t.half_blocks) s += ", half-width masked blocks";
  if (t.row_sum_mma) s += ", row sums by the PV GEMM";
  if (t.cluster) s += ", 2-CTA cluster";
  if (t.no_warp_specialization) s += ", no warp specialization";
  if (!t.unknown_tokens.empty()) {
    s += ", unknown tokens:";
    for (const std::string& u : t.unknown_tokens) s += " " + u;
  }
  for (const std::string& n : t.notes) s += ", " + n;
  return s;
}

std::optional<std::map<std::string, TableFlags>> read_tuning_table_flags(const std::string& path,
                                                                         std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open the tuning table " + path + ".";
    return std::nullopt;
  }
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const nlohmann::json::exception& e) {
    error = "the tuning table " + path + " is not valid JSON: " + e.what();
    return std::nullopt;
  }
  std::map<std::string, TableFlags> flags;
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array()) {
    error = "the tuning table " + path + " has no \"entries\" array.";
    return std::nullopt;
  }
  for (const nlohmann::json& entry : doc["entries"]) {
    if (!entry.is_object() || !entry.contains("kernel") || !entry["kernel"].is_string()) continue;
    TableFlags& f = flags[entry["kernel"].get<std::string>()];
    if (!entry.contains("config") || !entry["config"].is_object()) continue;
    const nlohmann::json& config = entry["config"];
    // Several entries may name one kernel; any entry that turns a feature on wins.
    auto read = [&](const char* key, std::optional<bool>& into) {
      if (config.contains(key) && config[key].is_boolean()) into = (into && *into) || config[key].get<bool>();
    };
    read("overlap", f.overlap);
    read("pingpong", f.pingpong);
    read("b2_order", f.b2_order);
    read("three_stage", f.three_stage);
  }
  return flags;
}

void apply_table_flags(KernelTraits& t, const TableFlags& flags) {
  auto apply = [&](const std::optional<bool>& on, bool KernelTraits::*field, const char* what) {
    if (on && *on && !(t.*field)) {
      t.*field = true;
      t.notes.push_back(std::string(what) + " from the tuning table");
    }
  };
  apply(flags.overlap, &KernelTraits::overlap, "overlap");
  apply(flags.b2_order, &KernelTraits::b2_order, "B.2 order");
  apply(flags.three_stage, &KernelTraits::three_stage, "3-stage");
  apply(flags.pingpong, &KernelTraits::pingpong, "pingpong");
}

}  // namespace fa3::sass
