// Register fragments in the wgmma accumulator layout (PTX ISA 9.7.15.5.1.1). For a 64 x N
// fp32 accumulator, thread t of the warpgroup (warp w = t / 32, lane l = t % 32) holds N/2
// values; for each 8-column group i:
//   v[4i], v[4i+1]     at row 16w + l/4,     cols 8i + 2(l%4) + {0, 1}
//   v[4i+2], v[4i+3]   at row 16w + l/4 + 8, same cols
// So each thread holds parts of exactly two rows ("half" 0 and 1), and a row is spread over
// the 4 lanes of a quad.
#pragma once

#include <stdint.h>

#include "ptx/math.cuh"
#include "ptx/wgmma.cuh"

namespace fa3::tile {

struct AccLayout {
  // Which of the thread's two rows element e belongs to (0: row, 1: row + 8).
  __device__ static constexpr int half(int e) { return (e % 4) / 2; }
  __device__ static __forceinline__ int row(int thread_in_wg, int e) {
    return 16 * (thread_in_wg / 32) + (thread_in_wg % 32) / 4 + 8 * half(e);
  }
  __device__ static __forceinline__ int col(int thread_in_wg, int e) {
    return col_offset(e) + 2 * (thread_in_wg % 4);
  }
  // col(t, e) = col(t, 0) + col_offset(e): where element e lies from the thread's first column.
  __device__ static constexpr int col_offset(int e) { return 8 * (e / 4) + (e % 2); }
};

template <int N>
__device__ __forceinline__ void fill(float (&acc)[N], float value) {
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = value;
}

// Keeps the compiler from moving accesses of these registers across wgmma fence/wait.
template <int N>
__device__ __forceinline__ void pin_registers(float (&acc)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) ptx::pin_register(acc[e]);
}

// Converts a 64 x N fp32 accumulator into the A operands of N/16 RS wgmmas (k16 steps).
// For 16-bit types two consecutive 8-column groups ARE the A fragment of one k16 step:
// a[kk] = {(row, c..c+1), (row+8, c..c+1), (row, c+8..c+9), (row+8, c+8..c+9)}.
template <bool IsBF16, int N>
__device__ __forceinline__ void acc_to_a_operands(const float (&acc)[N / 2],
                                                  uint32_t (&a)[N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float lo = acc[8 * kk + 2 * r], hi = acc[8 * kk + 2 * r + 1];
      a[kk][r] = IsBF16 ? ptx::pack_bf16x2(lo, hi) : ptx::pack_f16x2(lo, hi);
    }
  }
}

// Loads rows [0, 64) of a K-major tile in shared memory (Tile, 16-bit elements; rows_base its
// first row's address, the warpgroup's rows) into the A operands of K/16 RS wgmmas: the
// layout acc_to_a_operands produces, read element pair by element pair.
template <class Tile>
__device__ __forceinline__ void load_a_operands(uint32_t (&a)[Tile::kCols / 16][4],
                                                uint32_t rows_base, int thread_in_wg) {
  const int row = 16 * (thread_in_wg / 32) + (thread_in_wg % 32) / 4;
  const int col = 2 * (thread_in_wg % 4);
#pragma unroll
  for (int kk = 0; kk < Tile::kCols / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      a[kk][r] = ptx::ld_shared_u32(rows_base +
                                    Tile::offset(row + 8 * (r % 2), 16 * kk + 8 * (r / 2) + col));
}

}  // namespace fa3::tile
