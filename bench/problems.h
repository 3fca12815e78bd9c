// The attention problems a run measures, their FLOP counts, and what a kernel's name says
// about it. Pure host code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace fa3bench {

struct Problem {
  DType dtype = DType::BF16;
  int head_dim = 128;
  bool causal = false;
  int64_t batch = 1, heads = 1, kv_heads = 1, seqlen_q = 1, seqlen_k = 1;

  int64_t q_elements() const { return batch * seqlen_q * heads * head_dim; }
  int64_t kv_elements() const { return batch * seqlen_k * kv_heads * head_dim; }
  int64_t query_rows() const { return batch * heads * seqlen_q; }  // rows of O, entries of LSE
};

// "bf16 d128 causal S=4096 B=4 H=16" (Sq=/Sk= when they differ, H=32/8 with GQA).
std::string problem_label(const Problem& p);

// The paper's grid for one (dtype, head_dim, causal): seqlen 512..16k with
// batch = 16384/seqlen and heads = 2048/head_dim (FlashAttention-3, Section 4.1).
std::vector<Problem> paper_grid(DType dtype, int head_dim, bool causal);
// The shape of the paper's Table 2 (ablation): batch 4, seqlen 8448, 16 heads, d128,
// non-causal, fp16.
Problem ablation_problem();
// The problems of a run, in the order dtype x hdim x causal x seqlen.
std::vector<Problem> build_problems(const Options& o);

// Unmasked (query, key) pairs of one causal (batch, head): query i sees keys
// j <= i + seqlen_k - seqlen_q (bottom-right aligned).
int64_t causal_pairs(int64_t seqlen_q, int64_t seqlen_k);
// Forward FLOPs by the paper's formula: 4 * B * H * Sq * Sk * D (two GEMMs of 2*M*N*K),
// halved for causal with Sq == Sk (the paper's convention); causal with Sq != Sk counts the
// unmasked pairs exactly: 4 * D * B * H * pairs.
double forward_flops(const Problem& p);
// The FLOPs a row of `direction` is credited with, by the paper's convention: the backward
// does 5 GEMMs of the forward's size (S = QK^T recomputed, dP = dO V^T, dV = P^T dO,
// dQ = dS K, dK = dS^T Q) to the forward's 2, so bwd = 2.5 x forward_flops and fwdbwd = 3.5 x.
constexpr double kBackwardFlopsFactor = 2.5;
double direction_flops(const Problem& p, Direction direction);
double tflops(double flops, double ms);

// How many sets of input buffers (Q, K, V, O) a measurement rotates over: enough that
// sets x bytes_per_set >= 3 x L2, so no launch finds its inputs still in L2 from an earlier
// launch, and no more than fit in memory_budget bytes. Also when there are more sets than
// launches: the sets are filled in order, so those the launches read (the first ones) were
// pushed out of L2 by the later ones' filling. At least 1 when one set fits, 0 when not even
// one does.
int buffer_sets(size_t bytes_per_set, size_t l2_bytes, size_t memory_budget);

// What a kernel's name says about its algorithm, for the "variant" column (--ablation,
// --all-configs): its options as a tuning table's config writes them (the registry,
// src/kernels/fwd_names.h), the loop and the producer always, the others where they are not
// at their default: "loop=sequential, producer=warpgroup" for a plain fa3_fwd_..._w2 name,
// "loop=pipelined, pingpong, producer=warpgroup" for one with _ov_pp. The tile numbers and
// causal are columns of their own.
std::string kernel_variant(const std::string& kernel_name);

}  // namespace fa3bench
