#include "problems.h"

#include <algorithm>
#include <sstream>

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

double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0; }

int buffer_sets(size_t bytes_per_set, size_t l2_bytes, size_t memory_budget, int launches) {
  if (bytes_per_set == 0) return 1;
  const size_t fit = memory_budget / bytes_per_set;
  if (fit == 0) return 0;
  const size_t target = 3 * l2_bytes;
  size_t wanted = (target + bytes_per_set - 1) / bytes_per_set;
  wanted = std::max<size_t>(1, std::min<size_t>(wanted, static_cast<size_t>(std::max(1, launches))));
  return static_cast<int>(std::min(wanted, fit));
}

std::string kernel_variant(const std::string& kernel_name) {
  std::vector<std::string> tokens;
  std::stringstream in(kernel_name);
  for (std::string t; std::getline(in, t, '_');) tokens.push_back(t);
  bool overlap = false, three_stage = false, b2_order = false, double_p = false, pingpong = false,
       persistent = false, conditional_rescale = false, int_max = false, exp_after_pv_wait = false,
       ascending = false, half_blocks = false, row_sum_mma = false, cross_tile = false,
       q_warp = false, three_q_buffers = false, q_warp_stores_o = false, dynamic = false,
       q_in_registers = false, evict_first_q_o = false, evict_last_kv = false, cluster = false,
       no_warp_specialization = false;
  std::vector<std::string> others;
  // Tokens 0-7 are fa3, fwd, dtype, dNN, mNN, nNN, sNN, wNN: the tile config, not the variant.
  for (size_t i = 8; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t == "causal") continue;
    if (t == "ov") overlap = true;
    else if (t == "ov3") three_stage = true;
    else if (t == "b2") b2_order = true;
    else if (t == "pp") pingpong = true;
    else if (t == "p2") double_p = true;
    else if (t == "ps") persistent = true;
    else if (t == "cr") conditional_rescale = true;
    else if (t == "im") int_max = true;
    else if (t == "ew") exp_after_pv_wait = true;
    else if (t == "as") ascending = true;
    else if (t == "xt") cross_tile = true;
    else if (t == "hb") half_blocks = true;
    else if (t == "ls") row_sum_mma = true;
    else if (t == "qw") q_warp = true;
    else if (t == "q3") three_q_buffers = true;
    else if (t == "os") q_warp_stores_o = true;
    else if (t == "dy") dynamic = true;
    else if (t == "qr") q_in_registers = true;
    else if (t == "ef") evict_first_q_o = true;
    else if (t == "el") evict_last_kv = true;
    else if (t == "c2") cluster = true;
    else if (t == "nows") no_warp_specialization = true;
    else others.push_back(t);
  }
  std::string s = no_warp_specialization ? "no warp specialization" : "warp specialization";
  if (overlap) s += " + 2-stage GEMM-softmax pipelining (intra-warpgroup overlap)";
  if (double_p) s += " with two P register buffers";
  if (b2_order) s += " in the order of the paper's B.2 SASS";
  if (three_stage) s += " + 3-stage GEMM-softmax pipelining (paper Algorithm 4)";
  if (conditional_rescale) s += " + O rescaled only when a row max grows by more than 2^8";
  if (int_max) s += ", the row max by an integer max";
  if (exp_after_pv_wait) s += ", exponentials after the PV wait";
  if (ascending) s += " + key blocks in ascending order";
  if (half_blocks) s += " + half-width GEMMs where half a block is masked";
  if (row_sum_mma) s += " + softmax row sums by the PV GEMM";
  if (pingpong) s += " + pingpong scheduling";
  if (persistent) s += " + persistent grid";
  if (cross_tile) s += ", tiles pipelined into each other";
  if (q_warp) s += " (Q from a warp of its own)";
  if (three_q_buffers) s += " in three buffers";
  if (q_warp_stores_o) s += ", which also stores O";
  if (dynamic) s += ", tiles handed out through a counter";
  if (q_in_registers) s += " + QK^T with Q from registers";
  if (evict_first_q_o) s += " + Q and O evict-first in L2";
  if (evict_last_kv) s += " + K and V evict-last in L2";
  if (cluster) s += " + 2-CTA clusters (K/V multicast)";
  if (!overlap && !three_stage && !pingpong) s += ", no GEMM-softmax pipelining";
  for (const std::string& t : others) s += " + " + t;  // tokens this bench does not know yet
  return s;
}

}  // namespace fa3bench
