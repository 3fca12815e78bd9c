#include "runtime/kernel_registry.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/embedded.h"

namespace fa3 {

const char* dtype_name(DType d) { return d == DType::F16 ? "f16" : "bf16"; }

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

// "d128" with prefix 'd' -> 128; -1 when malformed (no leading zeros, no signs).
int number_after(const std::string& token, char prefix) {
  if (token.size() < 2 || token.size() > 5 || token[0] != prefix) return -1;
  if (token[1] == '0') return -1;
  int value = 0;
  for (size_t i = 1; i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return -1;
    value = value * 10 + (token[i] - '0');
  }
  return value;
}

}  // namespace

std::optional<FwdConfig> parse_fwd_kernel_name(const std::string& name) {
  const std::vector<std::string> t = split(name, '_');
  if (t.size() < 8 || t.size() > 23) return std::nullopt;
  if (t[0] != "fa3" || t[1] != "fwd") return std::nullopt;
  FwdConfig c;
  if (t[2] == "f16") c.dtype = DType::F16;
  else if (t[2] == "bf16") c.dtype = DType::BF16;
  else return std::nullopt;
  c.head_dim = number_after(t[3], 'd');
  c.block_m = number_after(t[4], 'm');
  c.block_n = number_after(t[5], 'n');
  c.stages = number_after(t[6], 's');
  c.consumer_warpgroups = number_after(t[7], 'w');
  // Optional flags, in this order: ov or ov3, p2 or b2, cr, im, ls, ew, as, hb, pp, ps, xt, qw, q3, os,
  // dy, qr, ef, el, c2, nows, causal.
  size_t i = 8;
  if (i < t.size() && t[i] == "ov") c.overlap = true, ++i;
  else if (i < t.size() && t[i] == "ov3") c.overlap = c.three_stage = true, ++i;
  if (i < t.size() && t[i] == "p2") c.double_p = true, ++i;
  else if (i < t.size() && t[i] == "b2") c.b2_order = true, ++i;
  if (i < t.size() && t[i] == "cr") c.conditional_rescale = true, ++i;
  if (i < t.size() && t[i] == "im") c.int_max = true, ++i;
  if (i < t.size() && t[i] == "ls") c.row_sum_mma = true, ++i;
  if (i < t.size() && t[i] == "ew") c.exp_after_pv_wait = true, ++i;
  if (i < t.size() && t[i] == "as") c.ascending = true, ++i;
  if (i < t.size() && t[i] == "hb") c.half_blocks = true, ++i;
  if (i < t.size() && t[i] == "pp") c.pingpong = true, ++i;
  if (i < t.size() && t[i] == "ps") c.persistent = true, ++i;
  if (i < t.size() && t[i] == "xt") c.cross_tile = true, ++i;
  if (i < t.size() && t[i] == "qw") c.q_warp = true, ++i;
  if (i < t.size() && t[i] == "q3") c.three_q_buffers = true, ++i;
  if (i < t.size() && t[i] == "os") c.q_warp_stores_o = true, ++i;
  if (i < t.size() && t[i] == "dy") c.dynamic_schedule = true, ++i;
  if (i < t.size() && t[i] == "qr") c.q_in_registers = true, ++i;
  if (i < t.size() && t[i] == "ef") c.evict_first_q_o = true, ++i;
  if (i < t.size() && t[i] == "el") c.evict_last_kv = true, ++i;
  if (i < t.size() && t[i] == "c2") c.cluster_m = 2, ++i;
  if (i < t.size() && t[i] == "nows") c.warp_specialized = false, ++i;
  if (i < t.size() && t[i] == "causal") c.causal = true, ++i;
  if (i != t.size()) return std::nullopt;
  if (!fwd_config_is_valid(c)) return std::nullopt;
  return c;
}

std::string fwd_kernel_name(const FwdConfig& c) {
  std::string s = "fa3_fwd_";
  s += dtype_name(c.dtype);
  s += "_d" + std::to_string(c.head_dim);
  s += "_m" + std::to_string(c.block_m);
  s += "_n" + std::to_string(c.block_n);
  s += "_s" + std::to_string(c.stages);
  s += "_w" + std::to_string(c.consumer_warpgroups);
  if (c.overlap) s += c.three_stage ? "_ov3" : "_ov";
  if (c.double_p) s += "_p2";
  if (c.b2_order) s += "_b2";
  if (c.conditional_rescale) s += "_cr";
  if (c.int_max) s += "_im";
  if (c.row_sum_mma) s += "_ls";
  if (c.exp_after_pv_wait) s += "_ew";
  if (c.ascending) s += "_as";
  if (c.half_blocks) s += "_hb";
  if (c.pingpong) s += "_pp";
  if (c.persistent) s += "_ps";
  if (c.cross_tile) s += "_xt";
  if (c.q_warp) s += "_qw";
  if (c.three_q_buffers) s += "_q3";
  if (c.q_warp_stores_o) s += "_os";
  if (c.dynamic_schedule) s += "_dy";
  if (c.q_in_registers) s += "_qr";
  if (c.evict_first_q_o) s += "_ef";
  if (c.evict_last_kv) s += "_el";
  if (c.cluster_m == 2) s += "_c2";
  if (!c.warp_specialized) s += "_nows";
  if (c.causal) s += "_causal";
  return s;
}

const std::vector<KernelInfo>& compiled_kernels() {
  static const std::vector<KernelInfo> kernels = [] {
    std::vector<KernelInfo> list;
    for (size_t i = 0; i < kEmbeddedCubinCount; ++i) {
      const EmbeddedBlob& blob = kEmbeddedCubins[i];
      KernelInfo k;
      k.name = blob.name;
      std::optional<FwdConfig> cfg = parse_fwd_kernel_name(k.name);
      // The Makefile builds only names that parse; a failure here is a build defect.
      if (!cfg) std::abort();
      k.fwd = *cfg;
      k.cubin = blob.begin;
      k.cubin_size = static_cast<size_t>(blob.end - blob.begin);
      list.push_back(k);
    }
    std::sort(list.begin(), list.end(),
              [](const KernelInfo& a, const KernelInfo& b) { return a.name < b.name; });
    return list;
  }();
  return kernels;
}

const KernelInfo* find_compiled_kernel(const std::string& name) {
  for (const KernelInfo& k : compiled_kernels())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace fa3
