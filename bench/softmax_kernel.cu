#include "softmax_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>

namespace fa3bench {

namespace {

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T from_float(float x);
template <> __device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Running max and sum of 2^(x - max) over a set of log2-domain scores. An empty set is
// {-inf, 0}.
struct MaxSum {
  float max;
  float sum;
};

__device__ inline MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.f};  // both empty: avoid (-inf) - (-inf) = NaN
  return {m, a.sum * exp2f(a.max - m) + b.sum * exp2f(b.max - m)};
}

__device__ inline MaxSum add(MaxSum a, float x) {  // one exp2 per element
  if (x > a.max) return {x, a.sum * exp2f(a.max - x) + 1.f};
  return {a.max, a.sum + exp2f(x - a.max)};
}

__device__ inline MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                       __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = merge(v, other);
  }
  return v;
}

// The block's combined MaxSum, in every thread. blockDim.x is a multiple of 32, <= 1024.
__device__ MaxSum block_merge(MaxSum v) {
  __shared__ MaxSum per_warp[32];
  __shared__ MaxSum total;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  v = warp_merge(v);
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    MaxSum w = lane < warps ? per_warp[lane] : MaxSum{-INFINITY, 0.f};
    w = warp_merge(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  return total;
}

// One CTA per row of S. Two passes over the row: the online max/sum, then P.
template <typename T>
__global__ void attention_softmax_kernel(const T* __restrict__ scores, T* __restrict__ probs,
                                         int64_t seqlen_q, int64_t seqlen_k, float scale_log2,
                                         bool causal) {
  const int64_t row = blockIdx.x;
  const int64_t i = row % seqlen_q;
  const int64_t visible =
      causal ? min(seqlen_k, max(int64_t{0}, i + seqlen_k - seqlen_q + 1)) : seqlen_k;
  const T* s = scores + row * seqlen_k;
  T* p = probs + row * seqlen_k;

  MaxSum local{-INFINITY, 0.f};
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) local = add(local, to_float(s[j]) * scale_log2);
  const MaxSum total = block_merge(local);
  const float inv_sum = total.sum > 0.f ? 1.f / total.sum : 0.f;

  for (int64_t j = threadIdx.x; j < seqlen_k; j += blockDim.x) {
    const float prob = j < visible ? exp2f(to_float(s[j]) * scale_log2 - total.max) * inv_sum : 0.f;
    p[j] = from_float<T>(prob);
  }
}

// About 8 elements per thread, 32..256 threads: short rows still fill the SMs with CTAs,
// long rows get enough threads to stream.
int threads_for(int64_t seqlen_k) {
  const int64_t warps = (seqlen_k / 8 + 31) / 32;
  return static_cast<int>(32 * std::min<int64_t>(8, std::max<int64_t>(1, warps)));
}

}  // namespace

cudaError_t launch_attention_softmax(const void* scores, void* probs, int64_t rows,
                                     int64_t seqlen_q, int64_t seqlen_k, float scale, bool causal,
                                     bool is_bf16, cudaStream_t stream) {
  if (rows < 1 || rows > INT_MAX || seqlen_q < 1 || seqlen_k < 1) return cudaErrorInvalidValue;
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x * log2(e))
  const dim3 grid(static_cast<unsigned>(rows)), block(static_cast<unsigned>(threads_for(seqlen_k)));
  if (is_bf16)
    attention_softmax_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(scores), static_cast<__nv_bfloat16*>(probs), seqlen_q,
        seqlen_k, scale_log2, causal);
  else
    attention_softmax_kernel<__half><<<grid, block, 0, stream>>>(
        static_cast<const __half*>(scores), static_cast<__half*>(probs), seqlen_q, seqlen_k,
        scale_log2, causal);
  return cudaGetLastError();
}

}  // namespace fa3bench
