// The two GEMMs of the standard-attention baseline as cuBLAS strided-batched calls:
// which matrices, leading dimensions and batch strides make S = QK^T and O = PV for the
// (batch, seqlen, heads, head_dim) layout, GQA included. Pure host code (no cuBLAS types),
// so the tests can run the same descriptors through a CPU GEMM.
#pragma once

#include <cstdint>
#include <vector>

#include "problems.h"

namespace fa3bench {

// One cublasGemmStridedBatchedEx call in cuBLAS's column-major terms, 16-bit A, B, C:
// for e in [0, batch): C_e (m x n, ldc) = op(A_e) (m x k) * B_e (k x n, ldb), with
// op(A) = A^T (A stored k x m, lda) when transpose_a, else A (stored m x k, lda);
// X_e = x + e * stride_x elements.
struct StridedBatchedGemm {
  bool transpose_a = false;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int lda = 0;
  long long stride_a = 0;
  const void* b = nullptr;
  int ldb = 0;
  long long stride_b = 0;
  void* c = nullptr;
  int ldc = 0;
  long long stride_c = 0;
  int batch = 0;
};

// Device (or host) pointers of one input set, contiguous (batch, seqlen, heads, head_dim).
struct AttentionBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
};

// One call covers the kv_heads heads hk of one (batch b, group member g): query head
// h = hk * G + g with G = heads / kv_heads, so every batch stride is non-zero and K/V are
// never duplicated. A problem needs batch x G calls of each GEMM.
struct HeadGroup {
  int64_t b = 0, g = 0;
};
std::vector<HeadGroup> head_groups(const Problem& p);

// S (batch, heads, seqlen_q, seqlen_k) row-major = Q K^T, unscaled.
StridedBatchedGemm scores_gemm(const Problem& p, const AttentionBuffers& x, void* scores,
                               HeadGroup hg);
// O = P V, P laid out like S.
StridedBatchedGemm output_gemm(const Problem& p, const AttentionBuffers& x, const void* probs,
                               HeadGroup hg);

// cuBLAS takes m, n, k, leading dimensions and batch counts as int; the softmax grid has one
// CTA per query row.
bool fits_32bit_dimensions(const Problem& p);

}  // namespace fa3bench
