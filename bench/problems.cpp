#include "problems.h"

#include <algorithm>
#include <sstream>

#include "kernels/fwd_names.h"

namespace fa3bench {

std::string problem_label(const Problem& p) {
  std::ostringstream out;
  out << dtype_label(p.dtype) << " d" << p.head_dim << (p.causal ? " causal" : "");
  if (p.seqlen_q == p.seqlen_k) out << " S=" << p.seqlen_q;
  else out << " Sq=" << p.seqlen_q << " Sk=" << p.seqlen_k;
  out << " B=" << p.batch << " H=" << p.heads;
  if (p.kv_heads != p.heads) out << "/" << p.kv_heads;
  return out.str();
}

namespace {

// The paper holds batch * seqlen = 16k tokens and heads * head_dim = 2048 (hidden size).
constexpr int64_t kPaperTokens = 16384;
constexpr int64_t kPaperHidden = 2048;

Problem make_problem(const Options& o, DType dtype, int head_dim, bool causal, int64_t seqlen_q,
                     int64_t seqlen_k) {
  Problem p;
  p.dtype = dtype;
  p.head_dim = head_dim;
  p.causal = causal;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.batch = o.batch ? *o.batch : std::max<int64_t>(1, kPaperTokens / seqlen_q);
  p.heads = o.heads ? *o.heads : std::max<int64_t>(1, kPaperHidden / head_dim);
  p.kv_heads = o.kv_heads ? *o.kv_heads : p.heads;
  return p;
}

}  // namespace

std::vector<Problem> paper_grid(DType dtype, int head_dim, bool causal) {
  const Options defaults;
  std::vector<Problem> grid;
  for (int64_t s : defaults.seqlens) grid.push_back(make_problem(defaults, dtype, head_dim, causal, s, s));
  return grid;
}

Problem ablation_problem() {
  Problem p;
  p.dtype = DType::F16;
  p.head_dim = 128;
  p.causal = false;
  p.batch = 4;
  p.heads = p.kv_heads = 16;
  p.seqlen_q = p.seqlen_k = 8448;
  return p;
}

std::vector<Problem> build_problems(const Options& o) {
  if (o.ablation) return {ablation_problem()};
  std::vector<Problem> problems;
  for (DType dtype : o.dtypes)
    for (int d : o.head_dims)
      for (bool causal : o.causal) {
        if (o.seqlen_q) {
          problems.push_back(make_problem(o, dtype, d, causal, *o.seqlen_q, *o.seqlen_k));
          continue;
        }
        for (int64_t s : o.seqlens) problems.push_back(make_problem(o, dtype, d, causal, s, s));
      }
  return problems;
}

int64_t causal_pairs(int64_t seqlen_q, int64_t seqlen_k) {
  // Row i sees max(0, i + Sk - Sq + 1) keys (never more than Sk since i <= Sq - 1): an
  // arithmetic series over the rows that see at least one key, ending at Sk for the last row.
  const int64_t first_row = std::max<int64_t>(0, seqlen_q - seqlen_k);
  const int64_t rows = seqlen_q - first_row;
  const int64_t first_count = first_row + seqlen_k - seqlen_q + 1;
  return rows * (first_count + seqlen_k) / 2;
}

double forward_flops(const Problem& p) {
  const double per_pair = 4.0 * p.head_dim * static_cast<double>(p.batch) * p.heads;
  const double full = per_pair * static_cast<double>(p.seqlen_q) * p.seqlen_k;
  if (!p.causal) return full;
  if (p.seqlen_q == p.seqlen_k) return full / 2;
  return per_pair * static_cast<double>(causal_pairs(p.seqlen_q, p.seqlen_k));
}

double direction_flops(const Problem& p, Direction direction) {
  switch (direction) {
    case Direction::Fwd: return forward_flops(p);
    case Direction::Bwd: return kBackwardFlopsFactor * forward_flops(p);
    case Direction::FwdBwd: return (1.0 + kBackwardFlopsFactor) * forward_flops(p);
  }
  return 0;
}

double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0; }

int buffer_sets(size_t bytes_per_set, size_t l2_bytes, size_t memory_budget) {
  if (bytes_per_set == 0) return 1;
  const size_t fit = memory_budget / bytes_per_set;
  if (fit == 0) return 0;
  const size_t target = 3 * l2_bytes;
  const size_t wanted = std::max<size_t>(1, (target + bytes_per_set - 1) / bytes_per_set);
  return static_cast<int>(std::min(wanted, fit));
}

std::string kernel_variant(const std::string& kernel_name) {
  const fa3::FwdNameParse parsed = fa3::parse_fwd_name(kernel_name.c_str());
  if (!parsed.ok) return std::string("not a forward kernel name: ") + parsed.error;
  const fa3::FwdConfig& c = parsed.config;
  std::string s;
  for (const fa3::FwdOption& o : fa3::kFwdOptions) {
    // Causal has a column of its own; the loop and the producer are the axes of the paper's
    // ablation (Table 2), so they are named at their defaults too.
    if (o.field == fa3::FwdField::Causal) continue;
    const fa3::FwdSpelling* spelling = fa3::fwd_spelling_of(c, o);
    const bool is_default = spelling == &o.spellings[0];
    if (is_default && o.field != fa3::FwdField::Loop && o.field != fa3::FwdField::Producer) continue;
    const std::string value = o.kind == fa3::FwdFieldKind::Bool ? ""
                              : o.kind == fa3::FwdFieldKind::Enum
                                  ? std::string("=") + spelling->word
                                  : "=" + std::to_string(fa3::fwd_field_value(c, o.field));
    s += (s.empty() ? "" : ", ") + std::string(o.key) + value;
  }
  return s;
}

}  // namespace fa3bench
