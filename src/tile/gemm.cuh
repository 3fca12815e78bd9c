// Warpgroup GEMMs of the attention mainloop, each one wgmma group (fence, k16 steps, commit).
// The caller waits (ptx::wgmma_wait_group) and pins the accumulators afterwards.
#pragma once

#include <stdint.h>

#include "ptx/wgmma.cuh"
#include "tile/fragment.cuh"

namespace fa3::tile {

// acc (64 x N) = A (64 x K) * B^T, with A = rows [a_row0, +64) of tile ATile and B = the first
// N rows of tile BTile, both K-major in shared memory (S = Q K^T: K is the head dimension).
template <ptx::MmaType T, int N, class ATile, class BTile>
__device__ __forceinline__ void gemm_ss_abt(float (&acc)[N / 2], uint32_t a_base, int a_row0,
                                            uint32_t b_base) {
  static_assert(ATile::kCols == BTile::kCols, "A and B share the K extent");
  static_assert(BTile::kRows >= N, "B supplies the N columns of the product");
  pin_registers(acc);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < ATile::kCols / 16; ++kk)
    ptx::Wgmma<T, N>::template ss<0>(acc, ATile::kmajor_desc(a_base, a_row0, kk),
                                     BTile::kmajor_desc(b_base, 0, kk), kk > 0 ? 1u : 0u);
  ptx::wgmma_commit_group();
}

// The A operands of the first Steps k16 steps of an RS GEMM, fixed in their registers before
// the fence: the wgmmas read them while in flight.
template <int Steps, int AllSteps>
__device__ __forceinline__ void pin_a_operands(uint32_t (&a)[AllSteps][4]) {
  static_assert(Steps <= AllSteps, "the GEMM's k-steps are among the fragments");
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) ptx::pin_register(a[kk][r]);
}

// acc (64 x N) = A (64 x K) * B^T, with A in registers (K/16 fragments, load_a_operands) and
// B the first N rows of tile BTile, K-major in shared memory (S = Q K^T with Q in registers).
template <ptx::MmaType T, int N, class BTile, int K>
__device__ __forceinline__ void gemm_rs_abt(float (&acc)[N / 2], uint32_t (&a)[K / 16][4],
                                            uint32_t b_base) {
  static_assert(BTile::kCols == K, "A and B share the K extent");
  static_assert(BTile::kRows >= N, "B supplies the N columns of the product");
  pin_registers(acc);
  pin_a_operands<K / 16>(a);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::Wgmma<T, N>::template rs<0>(acc, a[kk], BTile::kmajor_desc(b_base, 0, kk),
                                     kk > 0 ? 1u : 0u);
  ptx::wgmma_commit_group();
}

// acc (64 x N) += A (64 x K) * B, with A in registers (K/16 fragments) and B the first K rows
// of tile BTile (rows x N columns, N contiguous: MN-major) in shared memory (O += P V).
// OnesCols: the product is that many columns wider, read from the 128-byte column chunk that
// follows the tile; filled with ones, they get A's row sums (Config::row_sum_mma).
template <ptx::MmaType T, int N, class BTile, int K = BTile::kRows, int OnesCols = 0>
__device__ __forceinline__ void gemm_rs_ab(float (&acc)[(N + OnesCols) / 2],
                                           uint32_t (&a)[BTile::kRows / 16][4],
                                           uint32_t b_base) {
  static_assert(BTile::kCols == N, "B supplies all N columns of the product");
  static_assert(K % 16 == 0 && K <= BTile::kRows, "K is whole k-steps of B's rows");
  pin_registers(acc);
  pin_a_operands<K / 16>(a);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::Wgmma<T, N + OnesCols>::template rs<1>(acc, a[kk], BTile::mnmajor_desc(b_base, kk), 1u);
  ptx::wgmma_commit_group();
}

}  // namespace fa3::tile
