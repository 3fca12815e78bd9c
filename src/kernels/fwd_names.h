// Forward kernel names: the one registry of their tokens, what each sets in FwdConfig and
// what it means, and the constexpr parser and printer built on it.
//
//   fa3_fwd_<dtype>_d<head_dim>_m<block_m>_n<block_n>_s<stages>_w<consumer warpgroups>
//           [_<option>...][_causal]
//
// e.g. fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_qr_causal. Options come in the
// order of kFwdOptions below, each at most once, each spelled by the tokens of one of its
// values (a value that is the default is spelled by nothing).
//
// Everything that reads or writes a kernel name derives from this file: the kernels
// themselves (fwd.cu parses its FA3_KERNEL_NAME at compile time, so the Makefile passes the
// name alone), the runtime's registry of compiled kernels, the tuning table's "config"
// objects, fa3-bench's variant column, fa3-sass's expectations, `fa3-table tokens` and the
// token table of docs/tuning_table.md (generated from it; a CPU test keeps them equal).
#pragma once

#include "kernels/fwd_config.h"

namespace fa3 {

// The fields of FwdConfig that name tokens set, in the order their tokens appear in a name.
enum class FwdField : int {
  Loop, RowMax, RowSumMma, ExpAfterPvWait, Ascending, HalfBlocks, Pingpong, Tiles,
  DynamicSchedule, QInRegisters, EvictFirstQO, EvictLastKV, ClusterM, Producer, Causal,
};

// One value of a field: the name tokens that spell it ("" for the default, which no token
// spells; several tokens are joined by '_'), its word in a tuning table's config object (for
// enum fields), and a one-line meaning.
struct FwdSpelling {
  const char* tokens;
  int value;
  const char* word;
  const char* meaning;
};

enum class FwdFieldKind : int { Bool, Enum, Int };

struct FwdOption {
  FwdField field;
  const char* key;  // FwdConfig's field, and its key in a tuning table's "config" object
  FwdFieldKind kind;
  const FwdSpelling* spellings;  // the default first
  int count;
  bool lab_only;  // no production kernel may set it (fa3-table tokens says so)
};

namespace fwd_names_detail {
constexpr FwdSpelling kLoop[] = {
    {"", static_cast<int>(Loop::Sequential), "sequential",
     "paper Algorithm 1: each GEMM waited for before the softmax that needs it"},
    {"ov", static_cast<int>(Loop::Pipelined), "pipelined",
     "Algorithm 2: QK^T of block j issued with PV of block j-1, softmax j under the PV GEMM"},
    {"ov3", static_cast<int>(Loop::ThreeStage), "three_stage",
     "3-stage pipelining: QK^T j+1 and PV j-1 both in flight under softmax j (lab)"},
    {"ov_p2", static_cast<int>(Loop::DoubleP), "double_p",
     "Algorithm 2 with P in two register buffers, no wait_group 0 in the loop (lab)"},
    {"ov_b2", static_cast<int>(Loop::B2Order), "b2_order",
     "Algorithm 2 in the order of the paper's Appendix B.2 SASS (fa3-sass's B.2 reference)"},
};
constexpr FwdSpelling kRowMax[] = {
    {"", static_cast<int>(RowMax::Exact), "exact", "O rescaled by exp2(m_old - m_new) every block"},
    {"cr", static_cast<int>(RowMax::Lazy), "lazy",
     "row max kept until it grows by more than 2^8; O rescaled only then"},
    {"cr_im", static_cast<int>(RowMax::LazyIntMax), "lazy_int_max",
     "lazy row max, a block's maxima by a 3-input integer max of the scores' bits"},
};
constexpr FwdSpelling kRowSumMma[] = {
    {"", 0, nullptr, "softmax row sums in fp32 (FADDs)"},
    {"ls", 1, nullptr,
     "row sums by the PV GEMM (ones after each V stage); for calls without an LSE only"},
};
constexpr FwdSpelling kExpAfterPvWait[] = {
    {"", 0, nullptr, "the exponentials may run under the PV GEMM"},
    {"ew", 1, nullptr, "a step's exponentials wait for its PV GEMM (lab)"},
};
constexpr FwdSpelling kAscending[] = {
    {"", 0, nullptr, "key blocks visited last to first (the masked ones first)"},
    {"as", 1, nullptr, "key blocks visited first to last (the causal diagonal last)"},
};
constexpr FwdSpelling kHalfBlocks[] = {
    {"", 0, nullptr, "every key block at full width"},
    {"hb", 1, nullptr, "a block whose upper half is masked for a warpgroup at half width"},
};
constexpr FwdSpelling kPingpong[] = {
    {"", 0, nullptr, "consumer warpgroups issue their GEMMs independently"},
    {"pp", 1, nullptr, "pingpong: consumer warpgroups take turns at issuing GEMMs (Section 3.1)"},
};
constexpr FwdSpelling kTiles[] = {
    {"", static_cast<int>(Tiles::PerCta), "per_cta", "one CTA per tile"},
    {"ps", static_cast<int>(Tiles::Persistent), "persistent",
     "persistent grid: one CTA per SM walks the tiles"},
    {"ps_xt", static_cast<int>(Tiles::CrossTile), "cross_tile",
     "persistent, a tile's last PV and epilogue overlap the next tile's first QK^T and softmax"},
    {"ps_xt_qw", static_cast<int>(Tiles::CrossTileQWarp), "cross_tile_q_warp",
     "cross-tile, Q loaded (and tiles drawn) by a producer warp of its own"},
    {"ps_xt_qw_q3", static_cast<int>(Tiles::CrossTileQWarp3), "cross_tile_q_warp_3",
     "cross-tile with a Q warp and three Q buffers: nobody waits for an O store's read"},
    {"ps_xt_qw_os", static_cast<int>(Tiles::CrossTileQWarpStoresO), "cross_tile_q_warp_stores_o",
     "cross-tile with a Q warp that also stores each tile's O"},
};
constexpr FwdSpelling kDynamicSchedule[] = {
    {"", 0, nullptr, "non-causal persistent CTA i takes tiles i, i + grid, ..."},
    {"dy", 1, nullptr, "non-causal persistent tiles drawn from the launch's counter"},
};
constexpr FwdSpelling kQInRegisters[] = {
    {"", 0, nullptr, "QK^T reads Q from shared memory"},
    {"qr", 1, nullptr, "QK^T with Q from registers (RS-wgmma), loaded once per tile"},
};
constexpr FwdSpelling kEvictFirstQO[] = {
    {"", 0, nullptr, "Q loads and O stores with the default L2 policy"},
    {"ef", 1, nullptr, "Q loads and O stores evict-first in L2 (lab)"},
};
constexpr FwdSpelling kEvictLastKV[] = {
    {"", 0, nullptr, "K/V loads with the default L2 policy"},
    {"el", 1, nullptr, "K/V loads evict-last in L2 (lab)"},
};
constexpr FwdSpelling kClusterM[] = {
    {"", 1, nullptr, "no cluster"},
    {"c2", 2, nullptr, "clusters of 2 CTAs sharing each K/V block by TMA multicast (lab)"},
};
constexpr FwdSpelling kProducer[] = {
    {"", static_cast<int>(Producer::Warpgroup), "warpgroup",
     "warp specialization: a producer warpgroup issues the TMA loads"},
    {"nows", static_cast<int>(Producer::InlineConsumer), "inline_consumer",
     "no warp specialization: a consumer thread issues the loads (Table 2 ablation)"},
};
constexpr FwdSpelling kCausal[] = {
    {"", 0, nullptr, "full attention"},
    {"causal", 1, nullptr, "causal mask, bottom-right aligned when seqlen_q != seqlen_k"},
};
template <int N>
constexpr int count_of(const FwdSpelling (&)[N]) { return N; }
}  // namespace fwd_names_detail

constexpr FwdOption kFwdOptions[] = {
    {FwdField::Loop, "loop", FwdFieldKind::Enum, fwd_names_detail::kLoop,
     fwd_names_detail::count_of(fwd_names_detail::kLoop), false},
    {FwdField::RowMax, "row_max", FwdFieldKind::Enum, fwd_names_detail::kRowMax,
     fwd_names_detail::count_of(fwd_names_detail::kRowMax), false},
    {FwdField::RowSumMma, "row_sum_mma", FwdFieldKind::Bool, fwd_names_detail::kRowSumMma, 2,
     false},
    {FwdField::ExpAfterPvWait, "exp_after_pv_wait", FwdFieldKind::Bool,
     fwd_names_detail::kExpAfterPvWait, 2, true},
    {FwdField::Ascending, "ascending", FwdFieldKind::Bool, fwd_names_detail::kAscending, 2, false},
    {FwdField::HalfBlocks, "half_blocks", FwdFieldKind::Bool, fwd_names_detail::kHalfBlocks, 2,
     false},
    {FwdField::Pingpong, "pingpong", FwdFieldKind::Bool, fwd_names_detail::kPingpong, 2, false},
    {FwdField::Tiles, "tiles", FwdFieldKind::Enum, fwd_names_detail::kTiles,
     fwd_names_detail::count_of(fwd_names_detail::kTiles), false},
    {FwdField::DynamicSchedule, "dynamic_schedule", FwdFieldKind::Bool,
     fwd_names_detail::kDynamicSchedule, 2, false},
    {FwdField::QInRegisters, "q_in_registers", FwdFieldKind::Bool, fwd_names_detail::kQInRegisters,
     2, false},
    {FwdField::EvictFirstQO, "evict_first_q_o", FwdFieldKind::Bool,
     fwd_names_detail::kEvictFirstQO, 2, true},
    {FwdField::EvictLastKV, "evict_last_kv", FwdFieldKind::Bool, fwd_names_detail::kEvictLastKV, 2,
     true},
    {FwdField::ClusterM, "cluster_m", FwdFieldKind::Int, fwd_names_detail::kClusterM, 2, true},
    {FwdField::Producer, "producer", FwdFieldKind::Enum, fwd_names_detail::kProducer, 2, false},
    {FwdField::Causal, "causal", FwdFieldKind::Bool, fwd_names_detail::kCausal, 2, false},
};
constexpr int kFwdOptionCount = static_cast<int>(sizeof(kFwdOptions) / sizeof(kFwdOptions[0]));

// The numbers after the dtype, in their order: prefix letter, FwdConfig field, meaning.
struct FwdNumber {
  char prefix;
  const char* key;
  const char* meaning;
};
constexpr FwdNumber kFwdNumbers[] = {
    {'d', "head_dim", "head dimension"},
    {'m', "block_m", "query rows per CTA (Br) = 64 x consumer warpgroups"},
    {'n', "block_n", "key rows per mainloop iteration (Bc)"},
    {'s', "stages", "depth of the K/V shared-memory pipeline"},
    {'w', "consumer_warpgroups", "consumer warpgroups (besides the producer warpgroup)"},
};
constexpr int kFwdNumberCount = 5;

constexpr int fwd_field_value(const FwdConfig& c, FwdField f) {
  switch (f) {
    case FwdField::Loop: return static_cast<int>(c.loop);
    case FwdField::RowMax: return static_cast<int>(c.row_max);
    case FwdField::RowSumMma: return c.row_sum_mma ? 1 : 0;
    case FwdField::ExpAfterPvWait: return c.exp_after_pv_wait ? 1 : 0;
    case FwdField::Ascending: return c.ascending ? 1 : 0;
    case FwdField::HalfBlocks: return c.half_blocks ? 1 : 0;
    case FwdField::Pingpong: return c.pingpong ? 1 : 0;
    case FwdField::Tiles: return static_cast<int>(c.tiles);
    case FwdField::DynamicSchedule: return c.dynamic_schedule ? 1 : 0;
    case FwdField::QInRegisters: return c.q_in_registers ? 1 : 0;
    case FwdField::EvictFirstQO: return c.evict_first_q_o ? 1 : 0;
    case FwdField::EvictLastKV: return c.evict_last_kv ? 1 : 0;
    case FwdField::ClusterM: return c.cluster_m;
    case FwdField::Producer: return static_cast<int>(c.producer);
    case FwdField::Causal: return c.causal ? 1 : 0;
  }
  return 0;
}

constexpr void set_fwd_field(FwdConfig& c, FwdField f, int v) {
  switch (f) {
    case FwdField::Loop: c.loop = static_cast<Loop>(v); break;
    case FwdField::RowMax: c.row_max = static_cast<RowMax>(v); break;
    case FwdField::RowSumMma: c.row_sum_mma = v != 0; break;
    case FwdField::ExpAfterPvWait: c.exp_after_pv_wait = v != 0; break;
    case FwdField::Ascending: c.ascending = v != 0; break;
    case FwdField::HalfBlocks: c.half_blocks = v != 0; break;
    case FwdField::Pingpong: c.pingpong = v != 0; break;
    case FwdField::Tiles: c.tiles = static_cast<Tiles>(v); break;
    case FwdField::DynamicSchedule: c.dynamic_schedule = v != 0; break;
    case FwdField::QInRegisters: c.q_in_registers = v != 0; break;
    case FwdField::EvictFirstQO: c.evict_first_q_o = v != 0; break;
    case FwdField::EvictLastKV: c.evict_last_kv = v != 0; break;
    case FwdField::ClusterM: c.cluster_m = v; break;
    case FwdField::Producer: c.producer = static_cast<Producer>(v); break;
    case FwdField::Causal: c.causal = v != 0; break;
  }
}

// The spelling of the value a config has for an option (nullptr: a value no name spells).
constexpr const FwdSpelling* fwd_spelling_of(const FwdConfig& c, const FwdOption& o) {
  const int v = fwd_field_value(c, o.field);
  for (int i = 0; i < o.count; ++i)
    if (o.spellings[i].value == v) return &o.spellings[i];
  return nullptr;
}

namespace fwd_names_detail {
constexpr int length(const char* s) {
  int n = 0;
  while (s[n] != '\0') ++n;
  return n;
}
// Whether name[pos..] is "_" + tokens followed by '_' or the end.
constexpr bool spells_at(const char* name, int pos, const char* tokens) {
  if (name[pos] != '_') return false;
  const int n = length(tokens);
  for (int i = 0; i < n; ++i)
    if (name[pos + 1 + i] != tokens[i]) return false;
  return name[pos + 1 + n] == '_' || name[pos + 1 + n] == '\0';
}
// "_<prefix><number>" at name[*pos]: the number (1-9999, no leading zero), or -1.
constexpr int number_at(const char* name, int* pos, char prefix) {
  if (name[*pos] != '_' || name[*pos + 1] != prefix) return -1;
  int i = *pos + 2, value = 0, digits = 0;
  if (name[i] == '0') return -1;
  while (name[i] >= '0' && name[i] <= '9' && digits < 5) {
    value = value * 10 + (name[i] - '0');
    ++i, ++digits;
  }
  if (digits == 0 || digits > 4 || (name[i] != '_' && name[i] != '\0')) return -1;
  *pos = i;
  return value;
}
constexpr bool starts_with(const char* s, const char* prefix) {
  for (int i = 0; prefix[i] != '\0'; ++i)
    if (s[i] != prefix[i]) return false;
  return true;
}
// The start every kernel name shares, forward and backward: <f16> or <bf16> (the family's
// prefixes, e.g. fa3_fwd_f16), then _d<head_dim>_m<block_m>_n<block_n>_s<stages>_w<warpgroups>
// (kFwdNumbers' order). error is nullptr when it parsed, else the rule the name breaks; pos is
// where the family's own tokens begin.
struct NameHead {
  DType dtype = DType::BF16;
  int numbers[kFwdNumberCount] = {};
  int pos = 0;
  const char* error = nullptr;
};
constexpr NameHead parse_name_head(const char* name, const char* f16, const char* bf16,
                                   const char* prefix_rule) {
  NameHead h;
  if (starts_with(name, f16)) {
    h.dtype = DType::F16;
    h.pos = length(f16);
  } else if (starts_with(name, bf16)) {
    h.dtype = DType::BF16;
    h.pos = length(bf16);
  } else {
    h.error = prefix_rule;
    return h;
  }
  for (int i = 0; i < kFwdNumberCount; ++i) {
    h.numbers[i] = number_at(name, &h.pos, kFwdNumbers[i].prefix);
    if (h.numbers[i] < 0) {
      h.error = "the dtype is followed by _d<head_dim>_m<block_m>_n<block_n>_s<stages>_w<warpgroups>";
      return h;
    }
  }
  return h;
}
// The head's fields into a FwdConfig or BwdConfig (the fields both have).
template <class Config>
constexpr void set_head_fields(Config& c, const NameHead& h) {
  c.dtype = h.dtype;
  c.head_dim = h.numbers[0];
  c.block_m = h.numbers[1];
  c.block_n = h.numbers[2];
  c.stages = h.numbers[3];
  c.consumer_warpgroups = h.numbers[4];
}
}  // namespace fwd_names_detail

struct FwdNameParse {
  bool ok = false;
  FwdConfig config{};
  const char* error = "";  // why the name is not a kernel's, when !ok
};

// Parses a forward kernel name (constexpr: the kernels parse their own at compile time).
constexpr FwdNameParse parse_fwd_name(const char* name) {
  using namespace fwd_names_detail;
  FwdNameParse r;
  const NameHead head =
      parse_name_head(name, "fa3_fwd_f16", "fa3_fwd_bf16",
                      "a forward kernel name starts with fa3_fwd_f16 or fa3_fwd_bf16");
  if (head.error != nullptr) {
    r.error = head.error;
    return r;
  }
  set_head_fields(r.config, head);
  int pos = head.pos;
  for (int f = 0; f < kFwdOptionCount; ++f) {
    const FwdOption& o = kFwdOptions[f];
    int best = 0, best_length = -1;  // the default, spelled by nothing
    for (int i = 1; i < o.count; ++i)
      if (spells_at(name, pos, o.spellings[i].tokens) && length(o.spellings[i].tokens) > best_length) {
        best = i;
        best_length = length(o.spellings[i].tokens);
      }
    set_fwd_field(r.config, o.field, o.spellings[best].value);
    if (best_length >= 0) pos += 1 + best_length;
  }
  if (name[pos] != '\0') {
    r.error = "a token is unknown or out of order (options come in the order of fwd_names.h)";
    return r;
  }
  if (!fwd_config_is_valid(r.config)) {
    r.error = "the config breaks a rule of fwd_config_is_valid (src/kernels/fwd_config.h)";
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace fa3
