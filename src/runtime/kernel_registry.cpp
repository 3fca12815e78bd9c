#include "runtime/kernel_registry.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/embedded.h"

namespace fa3 {

const char* dtype_name(DType d) { return d == DType::F16 ? "f16" : "bf16"; }

std::optional<FwdConfig> parse_fwd_kernel_name(const std::string& name, std::string* why) {
  // (A name with a NUL inside would parse as its prefix.)
  if (name.find('\0') != std::string::npos) {
    if (why) *why = "a kernel name has no NUL characters";
    return std::nullopt;
  }
  const FwdNameParse r = parse_fwd_name(name.c_str());
  if (!r.ok) {
    if (why) *why = r.error;
    return std::nullopt;
  }
  return r.config;
}

std::string fwd_kernel_name(const FwdConfig& c) {
  std::string s = "fa3_fwd_";
  s += dtype_name(c.dtype);
  const int numbers[kFwdNumberCount] = {c.head_dim, c.block_m, c.block_n, c.stages,
                                        c.consumer_warpgroups};
  for (int i = 0; i < kFwdNumberCount; ++i)
    s += std::string("_") + kFwdNumbers[i].prefix + std::to_string(numbers[i]);
  for (const FwdOption& o : kFwdOptions) {
    const FwdSpelling* spelling = fwd_spelling_of(c, o);
    if (spelling != nullptr && spelling->tokens[0] != '\0') s += std::string("_") + spelling->tokens;
  }
  return s;
}

std::string fwd_option_value_word(const FwdConfig& c, const FwdOption& o) {
  const int v = fwd_field_value(c, o.field);
  switch (o.kind) {
    case FwdFieldKind::Bool: return v ? "true" : "false";
    case FwdFieldKind::Int: return std::to_string(v);
    case FwdFieldKind::Enum: break;
  }
  const FwdSpelling* spelling = fwd_spelling_of(c, o);
  return spelling != nullptr && spelling->word != nullptr ? spelling->word : std::to_string(v);
}

std::vector<NamePart> explain_fwd_kernel_name(const std::string& name) {
  std::vector<NamePart> parts;
  const std::optional<FwdConfig> c = parse_fwd_kernel_name(name);
  if (!c) return parts;
  parts.push_back({"fa3_fwd", "direction", "forward", "a forward attention kernel", false});
  parts.push_back({dtype_name(c->dtype), "dtype", dtype_name(c->dtype),
                   "element type of Q, K, V and O", false});
  const int numbers[kFwdNumberCount] = {c->head_dim, c->block_m, c->block_n, c->stages,
                                        c->consumer_warpgroups};
  for (int i = 0; i < kFwdNumberCount; ++i)
    parts.push_back({kFwdNumbers[i].prefix + std::to_string(numbers[i]), kFwdNumbers[i].key,
                     std::to_string(numbers[i]), kFwdNumbers[i].meaning, false});
  for (const FwdOption& o : kFwdOptions) {
    const FwdSpelling* spelling = fwd_spelling_of(*c, o);
    const bool is_default = spelling == &o.spellings[0];
    parts.push_back({spelling ? spelling->tokens : "", o.key, fwd_option_value_word(*c, o),
                     spelling ? spelling->meaning : "", o.lab_only && !is_default});
  }
  return parts;
}

std::string fwd_tokens_markdown() {
  std::string grammar = "fa3_fwd_<dtype>";
  for (const FwdNumber& n : kFwdNumbers) grammar += std::string("_") + n.prefix + "<" + n.key + ">";
  std::string md =
      "A forward kernel's name is its config: `" + grammar +
      "[_<option>...]`. The options follow in the order of the second table, each at most "
      "once, each spelled by the tokens of one of its values; the value spelled by no token is "
      "the option's default, which the name leaves out.\n"
      "\n"
      "| part | field | meaning |\n"
      "|---|---|---|\n"
      "| `f16`, `bf16` | `dtype` | element type of Q, K, V and O |\n";
  for (const FwdNumber& n : kFwdNumbers)
    md += std::string("| `") + n.prefix + "<N>` | `" + n.key + "` | " + n.meaning + " |\n";
  md += "\n"
        "| tokens | `config` key | value | meaning | lab only |\n"
        "|---|---|---|---|---|\n";
  for (const FwdOption& o : kFwdOptions) {
    for (int i = 0; i < o.count; ++i) {
      const FwdSpelling& s = o.spellings[i];
      const std::string value = o.kind == FwdFieldKind::Enum ? std::string("\"") + s.word + "\""
                                : o.kind == FwdFieldKind::Int ? std::to_string(s.value)
                                : s.value != 0                ? "true"
                                                              : "false";
      const bool is_default = i == 0;
      md += "| " + (is_default ? std::string("(default)") : std::string("`_") + s.tokens + "`") +
            " | `" + o.key + "` | `" + value + "` | " + s.meaning + " | " +
            (o.lab_only && !is_default ? "yes" : "") + " |\n";
    }
  }
  return md;
}

std::optional<BwdConfig> parse_bwd_kernel_name(const std::string& name, std::string* why) {
  if (name.find('\0') != std::string::npos) {
    if (why) *why = "a kernel name has no NUL characters";
    return std::nullopt;
  }
  const BwdNameParse r = parse_bwd_name(name.c_str());
  if (!r.ok) {
    if (why) *why = r.error;
    return std::nullopt;
  }
  return r.config;
}

namespace {
// Each split of the backward config, by its enum value: the name's token ("" for the default,
// which the name leaves out; parse_bwd_name, bwd_config.h, reads them), the tuning table's
// word and the meaning fa3-table shows. One place for bwd_kernel_name, explain_bwd_kernel_name
// and bwd_config_json.
struct SplitSpelling {
  const char* token;
  const char* word;
  const char* meaning;
};
constexpr SplitSpelling kKvSplits[] = {
    {"", "keys", "each consumer warpgroup owns 64 keys of S^T, dP^T, dK and dV"},
    {"kvh", "head_dim", "the warpgroups share the keys and split the head dim of dK and dV (SS GEMMs)"},
    {"kvt", "transposed",
     "as kvh, with dK^T and dV^T accumulated (block_n need not be a multiple of 64)"},
};
constexpr SplitSpelling kDqSplits[] = {
    {"", "keys", "each warpgroup computes dQ_i over its own keys: two fp32 parts a step"},
    {"dqh", "head_dim", "dQ_i from both warpgroups' dS^T in shared memory, split by head dim"},
    {"dqq", "queries", "dQ_i from both warpgroups' dS^T in shared memory, split by query rows"},
    {"dqt", "head_dim_transposed", "dQ_i^T = K_j^T dS^T, split by head dim (block_m may be 80)"},
};
const SplitSpelling& spelling(KvSplit s) { return kKvSplits[static_cast<int>(s)]; }
const SplitSpelling& spelling(DqSplit s) { return kDqSplits[static_cast<int>(s)]; }
}  // namespace

const char* bwd_kv_split_word(KvSplit s) { return spelling(s).word; }
const char* bwd_dq_split_word(DqSplit s) { return spelling(s).word; }

std::vector<NamePart> explain_bwd_kernel_name(const std::string& name) {
  std::vector<NamePart> parts;
  const std::optional<BwdConfig> c = parse_bwd_kernel_name(name);
  if (!c) return parts;
  parts.push_back({"fa3_bwd", "direction", "backward",
                   "a backward attention kernel (Algorithm 3); its cubin holds <name>_pre and "
                   "<name>_post too",
                   false});
  parts.push_back({dtype_name(c->dtype), "dtype", dtype_name(c->dtype),
                   "element type of Q, K, V, O, dO and of dQ, dK, dV", false});
  const struct {
    char prefix;
    const char* key;
    int value;
    const char* meaning;
  } numbers[] = {
      {'d', "head_dim", c->head_dim, "head dimension"},
      {'m', "block_m", c->block_m, "query rows per step (Br)"},
      {'n', "block_n", c->block_n, "keys per tile (Bc; a CTA each, or with _pt a CTA per SM walks tiles), whose dK and dV stay in registers"},
      {'s', "stages", c->stages, "depth of the Q / dO shared-memory pipeline"},
      {'w', "consumer_warpgroups", c->consumer_warpgroups,
       "consumer warpgroups (besides the producer warpgroup)"},
  };
  for (const auto& n : numbers)
    parts.push_back({n.prefix + std::to_string(n.value), n.key, std::to_string(n.value), n.meaning,
                     false});
  const SplitSpelling& kv = spelling(c->kv_split);
  parts.push_back({kv.token, "kv_split", kv.word, kv.meaning, false});
  const SplitSpelling& dq = spelling(c->dq_split);
  parts.push_back({dq.token, "dq_split", dq.word, dq.meaning, false});
  parts.push_back({c->rotated_walk ? "rw" : "", "rotated_walk", c->rotated_walk ? "true" : "false",
                   c->rotated_walk ? "non-causal: each CTA starts its walk of the query blocks at "
                                     "its own share of them"
                                   : "each CTA walks the query blocks from its first",
                   false});
  parts.push_back({c->first_store ? "fs" : "", "first_store", c->first_store ? "true" : "false",
                   c->first_store ? "the CTA that reaches a query block first stores its dQ "
                                    "parts (a ticket), the others add after it"
                                  : "every CTA adds its dQ parts onto a zeroed accumulator",
                   false});
  parts.push_back({c->producer_regs_32 ? "p32" : "", "producer_regs",
                   std::to_string(c->producer_regs()),
                   c->producer_regs_32 ? "setmaxnreg 32 / 232 (producer / consumers)"
                                       : "setmaxnreg 24 / 240 (producer / consumers)",
                   false});
  parts.push_back({c->persistent ? "pt" : "", "persistent", c->persistent ? "true" : "false",
                   c->persistent ? "a CTA per SM draws its tiles from a counter; dK and dV leave "
                                   "through shared memory (the dQ buffers) while the next tile runs"
                                 : "a CTA per K/V block",
                   false});
  parts.push_back({c->causal ? "causal" : "", "causal", c->causal ? "true" : "false",
                   c->causal ? "causal mask, bottom-right aligned" : "no mask", false});
  return parts;
}

std::string bwd_kernel_name(const BwdConfig& c) {
  std::string s = std::string("fa3_bwd_") + dtype_name(c.dtype);
  const int numbers[kFwdNumberCount] = {c.head_dim, c.block_m, c.block_n, c.stages,
                                        c.consumer_warpgroups};
  for (int i = 0; i < kFwdNumberCount; ++i)
    s += std::string("_") + kFwdNumbers[i].prefix + std::to_string(numbers[i]);
  for (const char* token : {spelling(c.kv_split).token, spelling(c.dq_split).token})
    if (*token) s += std::string("_") + token;
  if (c.rotated_walk) s += "_rw";
  if (c.first_store) s += "_fs";
  if (c.producer_regs_32) s += "_p32";
  if (c.persistent) s += "_pt";
  if (c.causal) s += "_causal";
  return s;
}

namespace {

struct KernelLists {
  std::vector<KernelInfo> forward, backward;
  std::vector<const KernelInfo*> all;
  std::vector<KernelInfo> both;  // copies of forward, then backward
};

const KernelLists& kernel_lists() {
  static const KernelLists lists = [] {
    KernelLists l;
    for (size_t i = 0; i < kEmbeddedCubinCount; ++i) {
      const EmbeddedBlob& blob = kEmbeddedCubins[i];
      KernelInfo k;
      k.name = blob.name;
      k.cubin = blob.begin;
      k.cubin_size = static_cast<size_t>(blob.end - blob.begin);
      // The Makefile builds only names that parse; a failure here is a build defect.
      if (std::optional<FwdConfig> f = parse_fwd_kernel_name(k.name)) {
        k.fwd = *f;
        l.forward.push_back(k);
      } else if (std::optional<BwdConfig> b = parse_bwd_kernel_name(k.name)) {
        k.direction = Direction::Backward;
        k.bwd = *b;
        l.backward.push_back(k);
      } else {
        std::abort();
      }
    }
    const auto by_name = [](const KernelInfo& a, const KernelInfo& b) { return a.name < b.name; };
    std::sort(l.forward.begin(), l.forward.end(), by_name);
    std::sort(l.backward.begin(), l.backward.end(), by_name);
    for (const KernelInfo& k : l.forward) l.all.push_back(&k);
    for (const KernelInfo& k : l.backward) l.all.push_back(&k);
    l.both = l.forward;
    l.both.insert(l.both.end(), l.backward.begin(), l.backward.end());
    return l;
  }();
  return lists;
}

}  // namespace

const std::vector<KernelInfo>& compiled_kernels() { return kernel_lists().forward; }
const std::vector<KernelInfo>& compiled_backward_kernels() { return kernel_lists().backward; }
const std::vector<const KernelInfo*>& all_compiled_kernels() { return kernel_lists().all; }
const std::vector<KernelInfo>& compiled_forward_and_backward_kernels() { return kernel_lists().both; }

const KernelInfo* find_compiled_kernel(const std::string& name) {
  for (const KernelInfo& k : compiled_kernels())
    if (k.name == name) return &k;
  return nullptr;
}

const KernelInfo* find_any_compiled_kernel(const std::string& name) {
  for (const KernelInfo* k : all_compiled_kernels())
    if (k->name == name) return k;
  return nullptr;
}

std::vector<std::string> fwd_lse_twin_names(const FwdConfig& c) {
  std::vector<std::string> names;
  if (!c.row_sum_mma) return names;
  FwdConfig twin = c;
  twin.row_sum_mma = false;
  for (const RowMax r : {c.row_max, RowMax::Lazy, RowMax::Exact}) {
    if (r == RowMax::Lazy && c.row_max == RowMax::Exact) continue;  // never more than it had
    twin.row_max = r;
    const std::string name = fwd_kernel_name(twin);
    if (fwd_config_is_valid(twin) &&
        std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  return names;
}

const KernelInfo* kernel_for_call(const KernelInfo& kernel, bool with_lse,
                                  const std::vector<KernelInfo>& kernels) {
  if (!with_lse || !kernel.fwd.row_sum_mma) return &kernel;
  for (const std::string& twin : fwd_lse_twin_names(kernel.fwd))
    for (const KernelInfo& k : kernels)
      if (k.name == twin) return &k;
  return nullptr;
}

}  // namespace fa3
