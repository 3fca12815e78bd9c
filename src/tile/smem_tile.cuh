// Shared-memory tiles of 16-bit elements in the layout TMA writes with SWIZZLE_128B and wgmma
// reads through 128B-swizzle descriptors: Cols/64 column chunks, each Rows x 128 bytes; inside
// a chunk the 16-byte unit u of row r lives at unit u ^ (r % 8), so the 8 rows of a group hit
// 8 different bank quads. Every tile starts 1024-byte aligned (the swizzle repeats every 8 rows
// of 128 bytes and the descriptors assume base offset 0).
#pragma once

#include <stdint.h>

#include "ptx/wgmma.cuh"

namespace fa3::tile {

template <int Rows, int Cols>
struct SwizzledTile {
  static_assert(Cols % 64 == 0, "tiles are whole 128-byte column chunks");
  static_assert(Rows % 8 == 0, "the swizzle pattern spans 8 rows");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kChunks = Cols / 64;
  static constexpr uint32_t kChunkBytes = Rows * 128;
  static constexpr uint32_t kBytes = kChunks * kChunkBytes;

  // Byte offset of element (row, col), col even: the 4 bytes of (col, col + 1).
  __device__ static __forceinline__ uint32_t offset(int row, int col) {
    const int chunk = col / 64, unit = (col % 64) / 8;
    return chunk * kChunkBytes + row * 128 + ((unit ^ (row % 8)) * 16) + (col % 8) * 2;
  }

  // K-major operand (A, or B of an "A B^T" product): rows [row0, row0 + 64 or N) along M/N,
  // the 16 columns [16 kk, 16 kk + 16) along K. Stepping K inside a 128-byte chunk moves the
  // start address by 32 bytes; the hardware applies the swizzle to the final address.
  // (The step is added to the descriptor of the rows' start, not to the address: kk is a
  // compile-time constant in the unrolled GEMM, so each step costs one add.)
  __device__ static __forceinline__ uint64_t kmajor_desc(uint32_t base, int row0, int kk) {
    const uint64_t rows = ptx::make_smem_desc(base + row0 * 128, 16, 1024, ptx::DescSwizzle::B128);
    return ptx::smem_desc_advance(rows, (kk / 4) * kChunkBytes + (kk % 4) * 32);
  }

  // MN-major B operand (the tile's rows are K, its columns N): K rows [16 kk, 16 kk + 16),
  // all Cols columns. LBO = distance between 64-column chunks, SBO = between 8-row groups.
  __device__ static __forceinline__ uint64_t mnmajor_desc(uint32_t base, int kk) {
    const uint64_t tile = ptx::make_smem_desc(base, kChunkBytes, 1024, ptx::DescSwizzle::B128);
    return ptx::smem_desc_advance(tile, kk * 16 * 128);
  }
};

}  // namespace fa3::tile
