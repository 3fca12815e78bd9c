// Shared-memory tiles in the layout TMA writes with SWIZZLE_128B and wgmma reads through
// 128B-swizzle descriptors, typed by element (element.cuh): the columns are cut into chunks of
// 128 bytes (64 16-bit, 128 e4m3 or 32 fp32 elements), each chunk Rows x 128 bytes; inside a
// chunk the 16-byte unit u of row r lives at unit u ^ (r % 8), so the 8 rows of a group hit 8
// different bank quads. Every tile starts 1024-byte aligned (the swizzle repeats every 8 rows
// of 128 bytes and the descriptors assume base offset 0). A last chunk may be partly used
// (224 e4m3 columns are 1.75 chunks): its rows keep the 128-byte pitch.
#pragma once

#include <stdint.h>

#include "ptx/math.cuh"
#include "ptx/wgmma.cuh"
#include "tile/element.cuh"
#include "tile/fragment_order.h"

namespace fa3::tile {

template <class Elem, int Rows, int Cols>
struct SmemTile {
  static_assert((Cols * Elem::kBytes) % 16 == 0, "rows are whole 16-byte units");
  static_assert(Rows % 8 == 0, "the swizzle pattern spans 8 rows");
  using Element = Elem;
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kChunkCols = 128 / Elem::kBytes;  // columns of one 128-byte chunk
  static constexpr int kUnitCols = 16 / Elem::kBytes;    // columns of one 16-byte unit
  static constexpr int kChunks = (Cols + kChunkCols - 1) / kChunkCols;
  static constexpr uint32_t kChunkBytes = Rows * 128;
  static constexpr uint32_t kBytes = kChunks * kChunkBytes;
  // wgmma k-steps (32 bytes each, k16 of a 16-bit type, k32 of e4m3) along the columns of a
  // K-major operand.
  static constexpr int kKSteps = Cols * Elem::kBytes / 32;

  // Byte offset of element (row, col); the rest of its 16-byte unit follows it contiguously
  // (the 4 bytes of (col, col + 1) of a 16-bit tile with col even, and so on).
  __device__ static __forceinline__ uint32_t offset(int row, int col) {
    const int chunk = col / kChunkCols, unit = (col % kChunkCols) / kUnitCols;
    return chunk * kChunkBytes + row * 128 + ((unit ^ (row % 8)) * 16) +
           (col % kUnitCols) * Elem::kBytes;
  }

  // K-major operand (A, or B of an "A B^T" product): rows [row0, row0 + 64 or N) along M/N,
  // the columns of k-step kk along K (32 bytes: [16 kk, 16 kk + 16) of a 16-bit tile,
  // [32 kk, 32 kk + 32) of e4m3). Stepping K inside a 128-byte chunk moves the start address
  // by 32 bytes; the hardware applies the swizzle to the final address.
  // (The step is added to the descriptor of the rows' start, not to the address: kk is a
  // compile-time constant in the unrolled GEMM, so each step costs one add.)
  __device__ static __forceinline__ uint64_t kmajor_desc(uint32_t base, int row0, int kk) {
    const uint64_t rows = ptx::make_smem_desc(base + row0 * 128, 16, 1024, ptx::DescSwizzle::B128);
    return ptx::smem_desc_advance(rows, (kk / 4) * kChunkBytes + (kk % 4) * 32);
  }

  // MN-major B operand (the tile's rows are K, its columns N): K rows [16 kk, 16 kk + 16),
  // all Cols columns. LBO = distance between 64-column chunks, SBO = between 8-row groups.
  // 16-bit only: wgmma reads e4m3 K-major only.
  __device__ static __forceinline__ uint64_t mnmajor_desc(uint32_t base, int kk) {
    static_assert(Elem::kBytes == 2, "MN-major (transposed) operands are 16-bit only");
    const uint64_t tile = ptx::make_smem_desc(base, kChunkBytes, 1024, ptx::DescSwizzle::B128);
    return ptx::smem_desc_advance(tile, kk * 16 * 128);
  }

  // MN-major A operand of A = T^T (trans-a = 1): the tile's rows are K, its 64 columns
  // [col0, col0 + 64) are M - one chunk, col0 a multiple of 64. What dV = P^T dO and
  // dK = dS^T Q read when P and dS are stored as tiles of queries x keys (paper Algorithm 3
  // lines 26-27): M = keys, K = queries. LBO (between chunks along M) is not stepped by an
  // m64 operand; SBO = between 8-row groups along K.
  __device__ static __forceinline__ uint64_t mnmajor_a_desc(uint32_t base, int col0, int kk) {
    static_assert(Elem::kBytes == 2, "MN-major (transposed) operands are 16-bit only");
    const uint64_t cols = ptx::make_smem_desc(base + (col0 / kChunkCols) * kChunkBytes,
                                              kChunkBytes, 1024, ptx::DescSwizzle::B128);
    return ptx::smem_desc_advance(cols, kk * 16 * 128);
  }
};

// The untyped 16-bit tile of the forward kernel: Cols / 64 chunks of Rows x 128 bytes.
template <int Rows, int Cols>
using SwizzledTile = SmemTile<b16, Rows, Cols>;

// A warpgroup's 64 x N fp32 accumulator in shared memory in FRAGMENT order, not row-major:
// thread t's values 4i..4i+3 (8-column group i: rows r and r + 8, two columns each) are the
// 16 bytes at float 512 i + 4 t. Each warp's store is 512 contiguous bytes (no bank
// conflicts, no swizzle), and the tile is ONE contiguous run, so one bulk reduce-add
// (ptx/bulk.cuh) adds it to an fp32 buffer in the same order: the backward's dQ accumulator
// in the workspace is kept in this order, block by block (FA3 does the same), and the
// postprocess that scales and converts dQ reads it back through AccFragmentOrder.
template <int N>
struct AccStagingTile {
  static_assert(N % 8 == 0, "whole 8-column groups");
  static constexpr int kFloats = 64 * N;
  static constexpr uint32_t kBytes = kFloats * 4;

  // Float index of accumulator value e of thread t; row_of / col_of invert it.
  using Order = AccFragmentOrder;

  // Executed by the whole warpgroup: its accumulator to the tile at `base`, N / 8 16-byte
  // stores per thread. Follow with ptx::fence_proxy_async_shared and a barrier with the
  // thread that issues the bulk reduce-add.
  __device__ static __forceinline__ void warpgroup_store(const float (&acc)[N / 2],
                                                         uint32_t base, int thread_in_wg) {
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
      ptx::st_shared_v4_u32(base + 4 * Order::index(thread_in_wg, 4 * i),
                            make_uint4(__float_as_uint(acc[4 * i]), __float_as_uint(acc[4 * i + 1]),
                                       __float_as_uint(acc[4 * i + 2]),
                                       __float_as_uint(acc[4 * i + 3])));
  }
};

}  // namespace fa3::tile
