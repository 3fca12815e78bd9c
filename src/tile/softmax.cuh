// Online softmax over the rows of a wgmma accumulator tile (paper Algorithm 1 lines 18-19,
// 24). Scores are handled in the log2 domain: the softmax scale is folded into exp2 as
// scale * log2(e), so each probability is one FFMA and one MUFU.EX2.
#pragma once

#include <math.h>

#include "ptx/math.cuh"
#include "tile/fragment.cuh"

namespace fa3::tile {

// Reductions over the 4 lanes of a quad, which together hold one accumulator row. Every lane
// of the warp must call them (full-warp shuffle mask).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The largest growth of a row max, in the log2 domain, that a lazy OnlineSoftmax leaves
// unapplied: P~ then reaches at most 2^8 = 256 (exact in fp16, bf16 and e4m3), and O and l
// in fp32 have the range to spare.
constexpr float kLazyMaxSlack = 8.0f;

// Epilogue (Algorithm 1 line 24), per row from its max m and sum l: 1 / l (0 for a row that
// attended nothing) and LSE = ln(sum exp(scale * S)) = (m + log2 l) * ln 2 (-inf for a row
// that attended nothing). Both on the MUFU: O is rounded to 16 bits after the multiply, and
// the LSE's error stays near 2^-22 (the accurate forms cost ~150 dependent instructions per
// tile, 5% of the samples of d64 causal at 1k).
__device__ __forceinline__ void row_factors(const float (&m)[2], const float (&l)[2],
                                            float (&inv_sum)[2], float (&lse)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool empty = !(l[h] > 0.0f);
    inv_sum[h] = empty ? 0.0f : ptx::rcp_approx(l[h]);
    lse[h] = empty ? -INFINITY : (m[h] + ptx::lg2_approx(l[h])) * 0.69314718055994531f;
  }
}

// Reductions of the row max over integers, three at a time: ptxas makes each
// max(max(a, b), c) of 32-bit ints one VIMNMX3 on sm_90 (there is no 3-input float max before
// sm_100), so a row's 32 values take 16 instructions instead of 31 FMNMX.
template <int N>
__device__ __forceinline__ int max3_reduce(const int (&v)[N]) {
  if constexpr (N == 1) {
    return v[0];
  } else if constexpr (N == 2) {
    return max(v[0], v[1]);
  } else {
    constexpr int kFull = N / 3, kRest = N % 3;
    int w[kFull + (kRest ? 1 : 0)];
#pragma unroll
    for (int i = 0; i < kFull; ++i) w[i] = max(max(v[3 * i], v[3 * i + 1]), v[3 * i + 2]);
    if constexpr (kRest == 1) w[kFull] = v[N - 1];
    if constexpr (kRest == 2) w[kFull] = max(v[N - 2], v[N - 1]);
    return max3_reduce(w);
  }
}
__device__ __forceinline__ int quad_max_s32(int x) {
  x = max(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return max(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// State of the two rows a thread holds parts of. LazyMax (FlashAttention-4's trick): a row
// keeps its max until a block's max exceeds it by more than kLazyMaxSlack, so after the
// first blocks the rescale factor is exactly 1 almost always and the caller may skip the
// O rescale. Exact either way: P~, l and O all use the max actually kept.
// SumByMma: the caller sums P~ itself (FwdConfig::row_sum_mma: the PV GEMM does; such a
// kernel serves calls that want no LSE) and rescales that sum with O; row_sum stays 0 and
// finalize is not used.
// IntMax (with LazyMax; RowMax::LazyIntMax): a block's row maxima as the largest 32-bit integer
// among the scores' bit patterns (VIMNMX3, above). Every positive float orders above every
// negative one as an int, and positive floats order as their ints, so that maximum is the
// true one whenever it is positive. A warp whose rows all keep m >= -kLazyMaxSlack needs no
// more: a block whose scores are all negative cannot pass the lazy test (m_block > m + slack
// >= 0), and one that passes has a positive, exact max. Other warps (a row without a key yet,
// m = -inf, or very negative scores) take the float max.
//
// Otherwise the row sums l are fp32 sums of P~ as computed, before P~ is rounded to 16 bits
// for the PV GEMM: the LSE the epilogue derives from them stays well within the 1e-4 of
// float64 that the backward (P = exp(S - LSE)) and the tests hold it to. (The PV GEMM's sums
// add P~ rounded to 16 bits: an LSE from them was off by up to 1.6e-3 in bf16.)
template <bool LazyMax, bool IntMax = false, bool SumByMma = false>
struct OnlineSoftmax {
  static_assert(!IntMax || LazyMax, "the integer max decides the lazy test only");
  float row_max[2];  // m_i: running max of scale * log2(e) * S (same in all 4 lanes of a quad)
  float row_sum[2];  // l_i: this lane's part of the running sum, reduced over the quad at the end

  __device__ __forceinline__ void init() {
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.0f;
  }

  // Turns the scores S of one key block (masked entries = -inf) into P~ = exp2(S * scale_log2
  // - m_new) in place, and returns per row the factor exp2(m_old - m_new) that O and l must be
  // rescaled by. scale_log2 > 0. A row that has seen only masked keys keeps m = -inf; its
  // P~ is 0 and its factor is 0, or 1 with LazyMax (either way harmless: O and l are still 0
  // then).
  template <int N>
  __device__ __forceinline__ void update(float (&s)[N], float scale_log2, float (&rescale)[2]) {
    float base[2];
    update_max(s, scale_log2, base, rescale);
    update_exp(s, scale_log2, base, rescale);
  }

  // update, first half: the new row maxima, and the base the exponentials subtract.
  template <int N>
  __device__ __forceinline__ void update_max(const float (&s)[N], float scale_log2,
                                             float (&base)[2], float (&rescale)[2]) {
    if constexpr (IntMax) {
      if (!__any_sync(0xffffffffu, !(row_max[0] >= -kLazyMaxSlack && row_max[1] >= -kLazyMaxSlack))) {
        int bits[2][N / 2];
#pragma unroll
        for (int e = 0; e < N; ++e) bits[AccLayout::half(e)][(e / 4) * 2 + e % 2] = __float_as_int(s[e]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // The lazy step below, on finite maxima. (The float path keeps its own copy: folded
          // into one, it changed the other kernels' code and made ptxas serialize one.)
          const float m_block = __int_as_float(quad_max_s32(max3_reduce(bits[h]))) * scale_log2;
          const bool grows = m_block > row_max[h] + kLazyMaxSlack;
          const float m_new = grows ? m_block : row_max[h];
          base[h] = m_new;
          rescale[h] = grows ? ptx::ex2_approx(row_max[h] - m_new) : 1.0f;
          row_max[h] = m_new;
        }
        return;
      }
    }
    // Two independent max chains per row (even / odd columns) halve the dependent latency.
    float block_max[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
    for (int e = 0; e < N; ++e)
      block_max[AccLayout::half(e)][e % 2] = fmaxf(block_max[AccLayout::half(e)][e % 2], s[e]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_block = quad_max(fmaxf(block_max[h][0], block_max[h][1])) * scale_log2;
      // (-inf + slack stays -inf: a row's first finite max is always taken.)
      const bool grows = LazyMax ? m_block > row_max[h] + kLazyMaxSlack : true;
      const float m_new = grows ? fmaxf(row_max[h], m_block) : row_max[h];
      // exp2(-inf - (-inf)) would be NaN: a row with no key yet uses 0 as its base.
      base[h] = m_new == -INFINITY ? 0.0f : m_new;
      rescale[h] = ptx::ex2_approx(row_max[h] - base[h]);
      if (LazyMax && !grows) rescale[h] = 1.0f;  // exactly, for the caller's skip
      row_max[h] = m_new;
    }
  }

  // update, second half: P~ = exp2(S * scale_log2 - base) in place, and the row sums.
  template <int N>
  __device__ __forceinline__ void update_exp(float (&s)[N], float scale_log2,
                                             const float (&base)[2], const float (&rescale)[2]) {
    float block_sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const int h = AccLayout::half(e);
      s[e] = ptx::ex2_approx(fmaf(s[e], scale_log2, -base[h]));
      if constexpr (!SumByMma) block_sum[h][e % 2] += s[e];
    }
    if constexpr (!SumByMma) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        row_sum[h] = row_sum[h] * rescale[h] + (block_sum[h][0] + block_sum[h][1]);
    }
  }
  // SumByMma: the rows' maxima, for the caller's epilogue factors (row_factors).
  __device__ __forceinline__ void copy_max(float (&m)[2]) const {
    m[0] = row_max[0];
    m[1] = row_max[1];
  }

  // Epilogue (Algorithm 1 line 24): row_factors of the rows' max and sum, each row's sum
  // reduced over its quad first. (Written out, not through row_factors: routing it through
  // that helper reorders the two quad reductions, changes most kernels' code and made ptxas
  // serialize f16 d64 m128 _hb_pp_ps_xt_qw_causal.)
  __device__ __forceinline__ void finalize(float (&inv_sum)[2], float (&lse)[2]) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(row_sum[h]);
      const bool empty = !(l > 0.0f);
      inv_sum[h] = empty ? 0.0f : ptx::rcp_approx(l);
      lse[h] = empty ? -INFINITY : (row_max[h] + ptx::lg2_approx(l)) * 0.69314718055994531f;
    }
  }
};

}  // namespace fa3::tile
