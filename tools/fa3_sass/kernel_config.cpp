#include "kernel_config.h"

#include <algorithm>
#include <fstream>
#include <iterator>
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
    {CheckId::TmaReduceAdd, "tma_reduce_add", "dQ added into global memory by TMA reduce-adds (UBLKRED .ADD or UTMAREDG.*.ADD), no float RED/ATOM adds"},
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
    {CheckId::BwdGemms, "bwd_gemms",
     "backward step: S^T, dP^T (SS, head_dim/16 k-steps), dV, dK (RS, block_m/16), dQ (SS, 4)"},
    {CheckId::BwdExpOverlap, "bwd_exp_overlap",
     "backward step: at least an eighth of P's exp2 issue while a GEMM (dP's) is in flight"},
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

// ---- name grammar: directions and dtypes here, numbers and options from the registry --------

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

// The registry's dtypes (f16, bf16) and those of kernels it does not describe yet (fp8).
struct DtypeInfo {
  const char* token;
  bool fp8;
};
const DtypeInfo kDtypes[] = {{"f16", false}, {"bf16", false}, {"e4m3", true}, {"e5m2", true}};

// KernelTraits' numbers in the order of the registry's kFwdNumbers (d, m, n, s, w).
std::optional<int> KernelTraits::* const kNumberFields[] = {
    &KernelTraits::head_dim, &KernelTraits::block_m, &KernelTraits::block_n,
    &KernelTraits::stages, &KernelTraits::consumer_warpgroups,
};
static_assert(std::size(kNumberFields) == kFwdNumberCount);

std::optional<int> number_after(const std::string& token, char prefix) {
  if (token.size() < 2 || token.size() > 6 || token[0] != prefix) return std::nullopt;
  int value = 0;
  for (size_t i = 1; i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return std::nullopt;
    value = value * 10 + (token[i] - '0');
  }
  return value;
}

bool apply_dtype_or_number(KernelTraits& t, const std::string& token) {
  for (const DtypeInfo& d : kDtypes) {
    if (token == d.token && t.dtype.empty()) {
      t.dtype = token;
      t.fp8 = d.fp8;
      return true;
    }
  }
  for (int i = 0; i < kFwdNumberCount; ++i) {
    std::optional<int>& field = t.*kNumberFields[i];
    if (auto value = number_after(token, kFwdNumbers[i].prefix); value && !field) {
      field = value;
      return true;
    }
  }
  return false;
}

// The registry's longest spelling that tokens[at..] begins with, set into `options`; how
// many tokens it took (0: none begins there).
size_t apply_option(FwdConfig& options, const std::vector<std::string>& tokens, size_t at) {
  const FwdOption* best_option = nullptr;
  const FwdSpelling* best = nullptr;
  size_t best_length = 0;
  for (const FwdOption& o : kFwdOptions) {
    for (int i = 1; i < o.count; ++i) {  // spelling 0, the default, has no tokens
      const std::vector<std::string> spelled = split(o.spellings[i].tokens, '_');
      if (spelled.size() <= best_length || at + spelled.size() > tokens.size() ||
          !std::equal(spelled.begin(), spelled.end(), tokens.begin() + at))
        continue;
      best_option = &o;
      best = &o.spellings[i];
      best_length = spelled.size();
    }
  }
  if (best != nullptr) set_fwd_field(options, best_option->field, best->value);
  return best_length;
}

// "loop=pipelined", "pingpong", "cluster_m=2": an option's value in the words of a tuning
// table's config (a flag, when it is on, by its key alone).
std::string option_text(const FwdConfig& c, const FwdOption& o) {
  const FwdSpelling* spelling = fwd_spelling_of(c, o);
  if (o.kind == FwdFieldKind::Bool) return o.key;
  const std::string value = o.kind == FwdFieldKind::Enum && spelling != nullptr
                                ? spelling->word
                                : std::to_string(fwd_field_value(c, o.field));
  return std::string(o.key) + "=" + value;
}

// What the name's tokens from `first` on spell, in any order: dtype, numbers, the registry's
// options; the rest are kept as unknown tokens.
void apply_tokens(KernelTraits& t, const std::vector<std::string>& tokens, size_t first) {
  for (size_t i = first; i < tokens.size();) {
    if (apply_dtype_or_number(t, tokens[i])) {
      ++i;
    } else if (const size_t taken = apply_option(t.options, tokens, i)) {
      i += taken;
    } else {
      t.unknown_tokens.push_back(tokens[i++]);
    }
  }
}

// ---- backward names (src/kernels/bwd_config.h) -------------------------------------------

struct RoleSuffix {
  const char* suffix;
  KernelRole role;
};
// _lf: the main loop again, for the deterministic mode's causal calls (bwd.cu), checked as one.
const RoleSuffix kBwdRoles[] = {{"_pre", KernelRole::Preprocess},
                                {"_post", KernelRole::Postprocess},
                                {"_lf", KernelRole::Main}};

bool is_bwd_name(const std::string& name) { return name.rfind("fa3_bwd_", 0) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A backward kernel, or one of its companions: the config from the main kernel's name (the
// grammar of bwd_config.h), the role from the suffix. A name the grammar rejects (a fixture's,
// say) gives what its tokens spell, and a note why the grammar rejected it.
void read_bwd_name(KernelTraits& t, const std::string& name) {
  const std::string main = main_kernel_name(name);
  for (const RoleSuffix& r : kBwdRoles)
    if (main != name && name == main + r.suffix) {
      t.role = r.role;
      t.last_first_entry = std::string(r.suffix) == "_lf";
    }
  const BwdNameParse parsed = parse_bwd_name(main.c_str());
  if (!parsed.ok) {
    apply_tokens(t, split(main, '_'), 2);
    t.notes.push_back(std::string("not a backward name of bwd_config.h (") + parsed.error + ")");
    return;
  }
  const BwdConfig& c = parsed.config;
  t.dtype = c.dtype == DType::F16 ? "f16" : "bf16";
  t.head_dim = c.head_dim;
  t.block_m = c.block_m;
  t.block_n = c.block_n;
  t.stages = c.stages;
  t.consumer_warpgroups = c.consumer_warpgroups;
  t.options.causal = c.causal;
  t.producer_regs = c.producer_regs();
  t.consumer_regs = c.consumer_regs();
  t.dq_split = c.dq_split;
  t.kv_split = c.kv_split;
}

const FwdOption& loop_option() {
  for (const FwdOption& o : kFwdOptions)
    if (o.field == FwdField::Loop) return o;
  return kFwdOptions[0];
}

}  // namespace

const char* check_name(CheckId id) { return info(id).name; }
const char* check_title(CheckId id) { return info(id).title; }

std::optional<CheckId> check_from_name(const std::string& name) {
  for (const CheckInfo& c : kChecks)
    if (name == c.name) return c.id;
  return std::nullopt;
}

const char* to_string(KernelRole role) {
  switch (role) {
    case KernelRole::Main:
      return "main";
    case KernelRole::Preprocess:
      return "pre";
    case KernelRole::Postprocess:
      return "post";
  }
  return "main";
}

std::string main_kernel_name(const std::string& function_name) {
  if (!is_bwd_name(function_name)) return function_name;
  for (const RoleSuffix& r : kBwdRoles)
    if (ends_with(function_name, r.suffix))
      return function_name.substr(0, function_name.size() - std::string(r.suffix).size());
  return function_name;
}

std::vector<std::string> companion_kernels(const std::string& kernel_name) {
  if (!is_bwd_name(kernel_name) || main_kernel_name(kernel_name) != kernel_name) return {};
  const BwdNameParse parsed = parse_bwd_name(kernel_name.c_str());
  const bool last_first = parsed.ok && parsed.config.causal_last_first();
  std::vector<std::string> out;
  for (const RoleSuffix& r : kBwdRoles)
    if (std::string(r.suffix) != "_lf" || last_first) out.push_back(kernel_name + r.suffix);
  return out;
}

std::vector<std::string> missing_companions(const std::vector<std::string>& function_names) {
  std::vector<std::string> missing;
  for (const std::string& f : function_names) {
    if (!is_bwd_name(f)) continue;
    const std::string kernel = main_kernel_name(f);
    std::vector<std::string> wanted = companion_kernels(kernel);
    wanted.insert(wanted.begin(), kernel);
    for (const std::string& w : wanted)
      if (std::find(function_names.begin(), function_names.end(), w) == function_names.end() &&
          std::find(missing.begin(), missing.end(), w) == missing.end())
        missing.push_back(w);
  }
  return missing;
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
  if (is_bwd_name(kernel_name)) {
    read_bwd_name(t, kernel_name);
    return t;
  }
  const FwdNameParse parsed = parse_fwd_name(kernel_name.c_str());
  if (parsed.ok) {
    const FwdConfig& c = parsed.config;
    t.dtype = c.dtype == DType::F16 ? "f16" : "bf16";
    t.head_dim = c.head_dim;
    t.block_m = c.block_m;
    t.block_n = c.block_n;
    t.stages = c.stages;
    t.consumer_warpgroups = c.consumer_warpgroups;
    t.options = c;
    return t;
  }
  apply_tokens(t, tokens, 2);
  return t;
}

std::vector<CheckId> checks_for(const KernelTraits& t) {
  // Rules, not a table of names: a kernel gets every check its traits call for.
  const FwdConfig& o = t.options;
  // A backward cubin's _pre and _post kernels are plain (no producer, no wgmma): no spills only.
  // The forward's loop options mean nothing to a backward kernel.
  const bool main = t.role == KernelRole::Main;
  const bool fwd = t.direction != "bwd";
  const bool bwd = t.fa3_name && !fwd && main;
  const std::vector<std::pair<CheckId, bool>> rules = {
      {CheckId::NoSpills, true},
      {CheckId::SetMaxReg, main && t.warp_specialized && o.warp_specialized()},
      // Without a producer warpgroup a consumer thread still loads with TMA.
      {CheckId::TmaLoads, main && t.warp_specialized},
      {CheckId::TmaReduceAdd, bwd},
      {CheckId::WgmmaUsed, main && t.matrix_kernel},
      // A kernel we know nothing about may still use wgmma; serialization is never wanted.
      {CheckId::WgmmaNotSerialized, (main && t.matrix_kernel) || !t.fa3_name},
      {CheckId::UniformOperands, main && t.matrix_kernel},
      {CheckId::Fp8UsesQgmma, main && t.matrix_kernel && t.fp8},
      // The B.2 layout for the loop built in B.2's order; the overlap itself for the other
      // pipelined loops (Algorithm 2 as written, two P buffers, Algorithm 4).
      {CheckId::TwoStagePipeline, fwd && t.matrix_kernel && o.b2_order()},
      {CheckId::GemmSoftmaxOverlap, fwd && t.matrix_kernel && o.overlap() && !o.b2_order()},
      {CheckId::TmaMulticast, fwd && o.cluster_m > 1},
      {CheckId::HalfBlocks, fwd && t.matrix_kernel && o.half_blocks},
      {CheckId::BwdGemms, bwd},
      {CheckId::BwdExpOverlap, bwd},
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
  for (int i = 0; i < kFwdNumberCount; ++i)
    if (const std::optional<int>& value = t.*kNumberFields[i])
      s += std::string(" ") + kFwdNumbers[i].prefix + std::to_string(*value);
  for (const FwdOption& o : kFwdOptions)
    if (fwd_field_value(t.options, o.field) != o.spellings[0].value)
      s += ", " + option_text(t.options, o);
  if (t.role == KernelRole::Main && t.producer_regs && t.consumer_regs)
    s += ", setmaxnreg " + std::to_string(*t.producer_regs) + "/" + std::to_string(*t.consumer_regs);
  if (t.role == KernelRole::Preprocess) s += ", its _pre kernel";
  if (t.role == KernelRole::Postprocess) s += ", its _post kernel";
  if (t.role == KernelRole::Main && t.last_first_entry) s += ", its _lf entry";
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
    if (config.contains("loop") && config["loop"].is_string()) {
      const FwdOption& loop = loop_option();
      for (int i = 0; i < loop.count; ++i)
        if (config["loop"] == loop.spellings[i].word && (!f.loop || *f.loop == fa3::Loop::Sequential))
          f.loop = static_cast<fa3::Loop>(loop.spellings[i].value);
    }
    if (config.contains("pingpong") && config["pingpong"].is_boolean())
      f.pingpong = (f.pingpong && *f.pingpong) || config["pingpong"].get<bool>();
  }
  return flags;
}

void apply_table_flags(KernelTraits& t, const TableFlags& flags) {
  if (flags.loop && *flags.loop != fa3::Loop::Sequential && t.options.loop == fa3::Loop::Sequential) {
    t.options.loop = *flags.loop;
    t.notes.push_back(option_text(t.options, loop_option()) + " from the tuning table");
  }
  if (flags.pingpong && *flags.pingpong && !t.options.pingpong) {
    t.options.pingpong = true;
    t.notes.push_back("pingpong from the tuning table");
  }
}

}  // namespace fa3::sass
