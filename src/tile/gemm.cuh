// Warpgroup GEMMs of the attention kernels, each one wgmma group (fence, k-steps, commit),
// executed by a whole warpgroup. The caller waits (ptx::wgmma_wait_group) and pins the
// accumulators afterwards. Names say which operands are transposed: "abt" = A B^T with both
// tiles K-major, "ab" = A B with B MN-major, "atb" = A^T B with both tiles' rows along K.
// A k-step is 32 bytes of K: k16 of f16/bf16, k32 of e4m3 (SmemTile::kKSteps).
#pragma once

#include <stdint.h>

#include "ptx/wgmma.cuh"
#include "tile/element.cuh"
#include "tile/fragment.cuh"

namespace fa3::tile {

// Whether a GEMM overwrites its accumulator (D = A B, the first block) or adds to it
// (D += A B): the scale-d of its first k-step.
enum class Accumulate : uint32_t { No = 0, Yes = 1 };

// acc (64 x N) = A (64 x K) * B^T, with A = rows [a_row0, +64) of tile ATile and B = the first
// N rows of tile BTile, both K-major in shared memory (S = Q K^T: K is the head dimension).
template <ptx::MmaType T, int N, class ATile, class BTile>
__device__ __forceinline__ void warpgroup_gemm_ss_abt(float (&acc)[N / 2], uint32_t a_base, int a_row0,
                                            uint32_t b_base) {
  static_assert(ATile::kCols == BTile::kCols, "A and B share the K extent");
  static_assert(BTile::kRows >= N, "B supplies the N columns of the product");
  static_assert(feeds_mma<typename ATile::Element>(T) && feeds_mma<typename BTile::Element>(T),
                "the tiles' element type is the GEMM's");
  pin_registers(acc);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < ATile::kKSteps; ++kk)
    ptx::Wgmma<T, N>::template ss<0>(acc, ATile::kmajor_desc(a_base, a_row0, kk),
                                     BTile::kmajor_desc(b_base, 0, kk), kk > 0 ? 1u : 0u);
  ptx::wgmma_commit_group();
}

// The A operands of the first Steps k-steps of an RS GEMM, fixed in their registers before
// the fence: the wgmmas read them while in flight.
template <int Steps, int AllSteps>
__device__ __forceinline__ void pin_a_operands(uint32_t (&a)[AllSteps][4]) {
  static_assert(Steps <= AllSteps, "the GEMM's k-steps are among the fragments");
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) ptx::pin_register(a[kk][r]);
}

// acc (64 x N) = A (64 x K) * B^T, with A in registers (one fragment per k-step,
// load_a_operands) and B the first N rows of tile BTile, K-major in shared memory (S = Q K^T
// with Q in registers; the FP8 O += P V with B = V^T, from AOperands below).
template <ptx::MmaType T, int N, class BTile, int K>
__device__ __forceinline__ void warpgroup_gemm_rs_abt(float (&acc)[N / 2],
                                            uint32_t (&a)[K / ptx::wgmma_k(T)][4],
                                            uint32_t b_base) {
  static_assert(BTile::kCols == K, "A and B share the K extent");
  static_assert(BTile::kRows >= N, "B supplies the N columns of the product");
  static_assert(feeds_mma<typename BTile::Element>(T), "B's element type is the GEMM's");
  pin_registers(acc);
  pin_a_operands<K / ptx::wgmma_k(T)>(a);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / ptx::wgmma_k(T); ++kk)
    ptx::Wgmma<T, N>::template rs<0>(acc, a[kk], BTile::kmajor_desc(b_base, 0, kk),
                                     kk > 0 ? 1u : 0u);
  ptx::wgmma_commit_group();
}

// warpgroup_gemm_rs_abt with typed A operands (acc_to_a, warpgroup_load_a_operands), the type taken
// from them; `accumulate` adds to acc (the FP8 O += P V) instead of overwriting it.
template <int N, class BTile, class Elem, int K>
__device__ __forceinline__ void warpgroup_gemm_rs_abt(float (&acc)[N / 2], AOperands<Elem, K>& a,
                                            uint32_t b_base,
                                            Accumulate accumulate = Accumulate::No) {
  constexpr ptx::MmaType T = Elem::kMma;
  static_assert(BTile::kCols == K, "A and B share the K extent");
  static_assert(BTile::kRows >= N, "B supplies the N columns of the product");
  static_assert(feeds_mma<typename BTile::Element>(T), "B's element type is A's");
  pin_registers(acc);
  pin_a_operands<AOperands<Elem, K>::kSteps>(a.reg);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < AOperands<Elem, K>::kSteps; ++kk)
    ptx::Wgmma<T, N>::template rs<0>(acc, a.reg[kk], BTile::kmajor_desc(b_base, 0, kk),
                                     kk > 0 ? 1u : static_cast<uint32_t>(accumulate));
  ptx::wgmma_commit_group();
}

// acc (64 x N) += A (64 x K) * B, with A in registers (K/16 fragments) and B the first K rows
// of tile BTile (rows x N columns, N contiguous: MN-major) in shared memory (O += P V).
// OnesCols: the product is that many columns wider, read from the 128-byte column chunk that
// follows the tile; filled with ones, they get A's row sums (Config::row_sum_mma).
template <ptx::MmaType T, int N, class BTile, int K = BTile::kRows, int OnesCols = 0>
__device__ __forceinline__ void warpgroup_gemm_rs_ab(float (&acc)[(N + OnesCols) / 2],
                                           uint32_t (&a)[BTile::kRows / 16][4],
                                           uint32_t b_base) {
  static_assert(BTile::kCols == N, "B supplies all N columns of the product");
  static_assert(K % 16 == 0 && K <= BTile::kRows, "K is whole k-steps of B's rows");
  static_assert(feeds_mma<typename BTile::Element>(T), "B's element type is the GEMM's");
  pin_registers(acc);
  pin_a_operands<K / 16>(a);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::Wgmma<T, N + OnesCols>::template rs<1>(acc, a[kk], BTile::mnmajor_desc(b_base, kk), 1u);
  ptx::wgmma_commit_group();
}

// acc (64 x N) (+)= A (64 x K) * B, A = rows [a_row0, +64) of tile ATile (K-major: its
// columns are K) and B the first K rows of tile BTile (rows K x N columns, MN-major), both in
// shared memory. The backward's dQ = dS K with dS staged in shared memory (paper Algorithm 3
// line 28). 16-bit only (MN-major B).
template <ptx::MmaType T, int N, class ATile, class BTile>
__device__ __forceinline__ void warpgroup_gemm_ss_ab(float (&acc)[N / 2], uint32_t a_base, int a_row0,
                                           uint32_t b_base, Accumulate accumulate) {
  static_assert(BTile::kCols == N, "B supplies all N columns of the product");
  static_assert(ATile::kCols <= BTile::kRows, "B has a row for every k of A");
  static_assert(feeds_mma<typename ATile::Element>(T) && feeds_mma<typename BTile::Element>(T),
                "the tiles' element type is the GEMM's");
  pin_registers(acc);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < ATile::kKSteps; ++kk)
    ptx::Wgmma<T, N>::template ss<1>(acc, ATile::kmajor_desc(a_base, a_row0, kk),
                                     BTile::mnmajor_desc(b_base, kk),
                                     kk > 0 ? 1u : static_cast<uint32_t>(accumulate));
  ptx::wgmma_commit_group();
}

// acc (64 x N) (+)= A^T (64 x K) * B: A^T = columns [a_col0, +64) of tile ATile read down its
// K rows (trans-a: ATile's rows are K, a_col0 a multiple of 64), B = the first K rows of tile
// BTile (MN-major), both in shared memory. The backward's dV += P^T dO and dK += dS^T Q with
// P and dS stored as queries x keys tiles: M = keys, K = queries (paper Algorithm 3 lines
// 26-27; the paper's RS form needs S computed transposed, as K Q^T, so that the accumulator
// already holds P^T). 16-bit only.
template <ptx::MmaType T, int N, class ATile, class BTile, int K = ATile::kRows>
__device__ __forceinline__ void warpgroup_gemm_ss_atb(float (&acc)[N / 2], uint32_t a_base, int a_col0,
                                            uint32_t b_base, Accumulate accumulate) {
  static_assert(BTile::kCols == N, "B supplies all N columns of the product");
  static_assert(K % 16 == 0 && K <= ATile::kRows && K <= BTile::kRows,
                "K is whole k-steps of A's and B's rows");
  static_assert(feeds_mma<typename ATile::Element>(T) && feeds_mma<typename BTile::Element>(T),
                "the tiles' element type is the GEMM's");
  pin_registers(acc);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::Wgmma<T, N>::template ss_mn_major_a<1>(acc, ATile::mnmajor_a_desc(a_base, a_col0, kk),
                                                BTile::mnmajor_desc(b_base, kk),
                                                kk > 0 ? 1u : static_cast<uint32_t>(accumulate));
  ptx::wgmma_commit_group();
}

// acc[mb] (64 x N) (+)= A^T (64 x K) * B^T for each of MBlocks wgmma M blocks, one group:
// A^T = columns [a_col0 + 64 mb, +64) of tile ATile read down its K rows (trans-a, as
// warpgroup_gemm_ss_atb), B = the first N rows of tile BTile, K-major (as warpgroup_gemm_ss_abt). The backward's
// dV^T = dO^T P and dK^T = Q^T dS of the _kvt kernels, with P^T and dS^T stored as keys x
// queries tiles: M = head-dim columns, N = keys, K = queries; the M blocks' wgmmas alternate
// so that each k-step's B serves both. And (MBlocks 1) dQ^T = K^T dS^T of the _dqt kernels,
// dS stored queries x keys: M = head-dim columns, N = queries, K = keys. 16-bit only.
template <ptx::MmaType T, int N, class ATile, class BTile, int MBlocks>
__device__ __forceinline__ void warpgroup_gemm_ss_atbt(float (&acc)[MBlocks][N / 2], uint32_t a_base,
                                             int a_col0, uint32_t b_base, Accumulate accumulate) {
  static_assert(ATile::kRows == BTile::kCols, "A's rows and B's columns are the K extent");
  static_assert(BTile::kRows >= N, "B supplies the N columns of the product");
  static_assert(feeds_mma<typename ATile::Element>(T) && feeds_mma<typename BTile::Element>(T),
                "the tiles' element type is the GEMM's");
#pragma unroll
  for (int mb = 0; mb < MBlocks; ++mb) pin_registers(acc[mb]);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BTile::kKSteps; ++kk)
#pragma unroll
    for (int mb = 0; mb < MBlocks; ++mb)
      ptx::Wgmma<T, N>::template ss_mn_major_a<0>(
          acc[mb], ATile::mnmajor_a_desc(a_base, a_col0 + 64 * mb, kk),
          BTile::kmajor_desc(b_base, 0, kk), kk > 0 ? 1u : static_cast<uint32_t>(accumulate));
  ptx::wgmma_commit_group();
}

}  // namespace fa3::tile
