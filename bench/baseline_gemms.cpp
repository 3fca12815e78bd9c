#include "baseline_gemms.h"

#include <climits>

namespace fa3bench {

std::vector<HeadGroup> head_groups(const Problem& p) {
  std::vector<HeadGroup> groups;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t g = 0; g < p.heads / p.kv_heads; ++g) groups.push_back({b, g});
  return groups;
}

// Row-major X (rows x cols, row stride ld) is column-major X^T for cuBLAS, so with Q
// (Sq x D, row stride H*D), K and V (Sk x D, row stride Hkv*D) of one (batch, head):
//   S^T (Sk x Sq, ld Sk) = K Q^T : A = K as column-major D x Sk, transposed; B = Q^T.
//   O^T (D x Sq, ld H*D) = V^T P^T: A = V^T as column-major D x Sk; B = P^T (Sk x Sq, ld Sk).
StridedBatchedGemm scores_gemm(const Problem& p, const AttentionBuffers& x, void* scores,
                               HeadGroup hg) {
  const int64_t d = p.head_dim, h = p.heads, hkv = p.kv_heads, group = h / hkv;
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
  StridedBatchedGemm gm;
  gm.transpose_a = true;
  gm.m = static_cast<int>(sk);
  gm.n = static_cast<int>(sq);
  gm.k = static_cast<int>(d);
  gm.a = static_cast<const uint16_t*>(x.k) + hg.b * sk * hkv * d;
  gm.lda = static_cast<int>(hkv * d);
  gm.stride_a = d;
  gm.b = static_cast<const uint16_t*>(x.q) + hg.b * sq * h * d + hg.g * d;
  gm.ldb = static_cast<int>(h * d);
  gm.stride_b = group * d;
  gm.c = static_cast<uint16_t*>(scores) + (hg.b * h + hg.g) * sq * sk;
  gm.ldc = static_cast<int>(sk);
  gm.stride_c = group * sq * sk;
  gm.batch = static_cast<int>(hkv);
  return gm;
}

StridedBatchedGemm output_gemm(const Problem& p, const AttentionBuffers& x, const void* probs,
                               HeadGroup hg) {
  const int64_t d = p.head_dim, h = p.heads, hkv = p.kv_heads, group = h / hkv;
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
  StridedBatchedGemm gm;
  gm.transpose_a = false;
  gm.m = static_cast<int>(d);
  gm.n = static_cast<int>(sq);
  gm.k = static_cast<int>(sk);
  gm.a = static_cast<const uint16_t*>(x.v) + hg.b * sk * hkv * d;
  gm.lda = static_cast<int>(hkv * d);
  gm.stride_a = d;
  gm.b = static_cast<const uint16_t*>(probs) + (hg.b * h + hg.g) * sq * sk;
  gm.ldb = static_cast<int>(sk);
  gm.stride_b = group * sq * sk;
  gm.c = static_cast<uint16_t*>(x.o) + hg.b * sq * h * d + hg.g * d;
  gm.ldc = static_cast<int>(h * d);
  gm.stride_c = group * d;
  gm.batch = static_cast<int>(hkv);
  return gm;
}

// cuBLAS takes m, n, k, leading dimensions and batch counts as int; the softmax grid has one
// CTA per query row.
bool fits_32bit_dimensions(const Problem& p) {
  constexpr int64_t kMax = INT_MAX;
  return p.seqlen_q <= kMax && p.seqlen_k <= kMax && p.heads * p.head_dim <= kMax &&
         p.query_rows() <= kMax;
}

}  // namespace fa3bench
