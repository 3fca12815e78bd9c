// Register fragments in the wgmma accumulator layout (PTX ISA 9.7.15.5.1.1). For a 64 x N
// fp32 accumulator, thread t of the warpgroup (warp w = t / 32, lane l = t % 32) holds N/2
// values; for each 8-column group i:
//   v[4i], v[4i+1]     at row 16w + l/4,     cols 8i + 2(l%4) + {0, 1}
//   v[4i+2], v[4i+3]   at row 16w + l/4 + 8, same cols
// So each thread holds parts of exactly two rows ("half" 0 and 1), and a row is spread over
// the 4 lanes of a quad.
//
// The A operand of an RS wgmma, per thread 4 b32 registers per k-step (PTX ISA 9.7.15.5.1,
// register fragments), with r = 16w + l/4 and q = l % 4:
//   16-bit (k16): a[r'] holds rows r + 8 (r' % 2), k = 8 (r' / 2) + 2q + {0, 1}
//   e4m3 (k32):   a[r'] holds rows r + 8 (r' % 2), k = 16 (r' / 2) + 4q + {0, 1, 2, 3}
// For 16-bit types two consecutive 8-column accumulator groups, converted, ARE the A operand
// of one k16 step. For e4m3 they are not: a thread holds columns 2q, 2q+1, 8+2q, 9+2q of each
// 16 where the A operand wants 4q..4q+3. FA3 (paper 3.3, Fig. 3/4) keeps the registers in
// place and permutes K instead: position 4q + j of each 16 k's of the A operand gets the
// accumulator's column 2q + (j % 2) + 8 (j / 2) - bytes d0 d1 d4 d5 | d2 d3 d6 d7 of each
// 8 accumulator values; "columns 0 1 8 9 now become the first four" - and the B operand's K
// (V's keys) gets the same permutation (Fp8KOrder; the V transpose of smem_copy.cuh writes it),
// so no value changes thread.
#pragma once

#include <stdint.h>

#include "ptx/math.cuh"
#include "ptx/wgmma.cuh"
#include "tile/element.cuh"
#include "tile/fragment_order.h"

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

// A warpgroup's accumulator (V fp32 values a thread) in global memory in fragment order
// (AccFragmentOrder, as AccStagingTile keeps it in shared memory): thread t's values 4i..4i+3
// are the 16 bytes at float 512 i + 4 t of `base`, so a warp's store is 512 contiguous bytes
// and no value changes thread. The backward's split tiles pass their partial dK_j and dV_j
// so. Executed by the whole warpgroup; `base` 16-byte aligned.
template <int V>
__device__ __forceinline__ void warpgroup_store_acc_global(float* base, const float (&acc)[V],
                                                           int thread_in_wg) {
  static_assert(V % 4 == 0, "whole 8-column groups");
#pragma unroll
  for (int i = 0; i < V / 4; ++i)
    *reinterpret_cast<float4*>(base + AccFragmentOrder::index(thread_in_wg, 4 * i)) =
        make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
}

// Adds an accumulator that warpgroup_store_acc_global stored at `base` into `acc`.
template <int V>
__device__ __forceinline__ void warpgroup_add_acc_global(const float* base, float (&acc)[V],
                                                         int thread_in_wg) {
  static_assert(V % 4 == 0, "whole 8-column groups");
#pragma unroll
  for (int i = 0; i < V / 4; ++i) {
    const float4 a =
        *reinterpret_cast<const float4*>(base + AccFragmentOrder::index(thread_in_wg, 4 * i));
    acc[4 * i] += a.x, acc[4 * i + 1] += a.y, acc[4 * i + 2] += a.z, acc[4 * i + 3] += a.w;
  }
}

// Keeps the compiler from moving accesses of these registers across wgmma fence/wait.
template <int N>
__device__ __forceinline__ void pin_registers(float (&acc)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) ptx::pin_register(acc[e]);
}

// The A operands of an RS GEMM with a 64 x K A of Elem: K / k-steps of 4 registers each.
// Typed, so that a P converted for one GEMM type cannot be fed to another.
template <class Elem, int K>
struct AOperands {
  static_assert(Elem::kIsMmaInput, "A operands are f16, bf16 or e4m3");
  static constexpr int kSteps = K / ptx::wgmma_k(Elem::kMma);
  static_assert(kSteps * ptx::wgmma_k(Elem::kMma) == K, "K is whole wgmma k-steps");
  uint32_t reg[kSteps][4];
};

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

// Converts a 64 x K fp32 accumulator (P, dS) into the A operands of a GEMM of Elem: for
// f16 / bf16 as acc_to_a_operands; for e4m3 (k32) register r of step kk packs accumulator
// values b, b+1, b+4, b+5 with b = 16 kk + 8 (r / 2) + 2 (r % 2): the K order of Fp8KOrder.
template <class Elem, int K>
__device__ __forceinline__ void acc_to_a(const float (&acc)[K / 2], AOperands<Elem, K>& a) {
  if constexpr (Elem::kBytes == 2) {
    acc_to_a_operands<Elem::kMma == ptx::MmaType::BF16, K>(acc, a.reg);
  } else {
#pragma unroll
    for (int kk = 0; kk < K / 32; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int b = 16 * kk + 8 * (r / 2) + 2 * (r % 2);
        a.reg[kk][r] = Elem::pack4(acc[b], acc[b + 1], acc[b + 4], acc[b + 5]);
      }
  }
}

// Loads rows [0, 64) of a K-major tile in shared memory (Tile, 16-bit elements; rows_base its
// first row's address, the warpgroup's rows) into the A operands of K/16 RS wgmmas: the
// layout acc_to_a_operands produces, read element pair by element pair.
template <class Tile>
__device__ __forceinline__ void load_a_operands(uint32_t (&a)[Tile::kCols / 16][4],
                                                uint32_t rows_base, int thread_in_wg) {
  static_assert(Tile::Element::kBytes == 2, "16-bit tiles: element pairs, k16 steps");
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
