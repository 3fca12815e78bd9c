// Register fragments to and from shared-memory tiles with ldmatrix / stmatrix (ptx/matrix.cuh):
// one instruction moves a 16 x 16 block of 16-bit elements for a whole warp, in the wgmma
// accumulator / A-operand layout (fragment.cuh), row by row through the tile's swizzle.
// Every function here is executed by a WHOLE WARPGROUP (its 4 warps, converged), each warp
// doing its 16 rows of the 64. Shared-memory stores are read by wgmma or TMA only after
// ptx::fence_proxy_async_shared by the writers and a barrier.
//
// Lane 8 m + j of a warp gives the address of row j of matrix m; the matrices of an x4 are,
// in register order, the 8 x 8 blocks (rows +0, cols +0), (rows +8, cols +0), (rows +0,
// cols +8), (rows +8, cols +8) of the warp's 16 x 16 block: exactly the four registers of a
// 16-bit A-operand k-step, and two 8-column accumulator groups.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "ptx/math.cuh"
#include "ptx/matrix.cuh"
#include "tile/element.cuh"
#include "tile/fragment.cuh"
#include "tile/smem_tile.cuh"

namespace fa3::tile {

// Stores a 64 x N accumulator already packed to Tile's 16-bit type (acc_to_a_operands: the A
// operands of an RS GEMM, which are the packed accumulator) into rows [row0, row0 + 64),
// columns [col0, col0 + N) of Tile, one stmatrix.x4 per 16 columns: the backward's dS^T goes
// to shared memory from the registers its dK GEMM reads, with no second conversion.
template <class Tile, int N>
__device__ __forceinline__ void warpgroup_store_packed(const uint32_t (&packed)[N / 16][4],
                                                       uint32_t tile_base, int row0, int col0,
                                                       int thread_in_wg) {
  static_assert(Tile::Element::kBytes == 2 && N % 16 == 0, "16-bit tiles, whole k16 blocks");
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  const int row = row0 + 16 * warp + 8 * ((lane / 8) % 2) + lane % 8;
  const int col = col0 + 8 * (lane / 16);
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk)
    ptx::stmatrix_x4(tile_base + Tile::offset(row, col + 16 * kk), packed[kk]);
}

// Stores the TRANSPOSE of a 64 x N 16-bit matrix held as packed A operands (the pairs of
// acc_to_a_operands): tile element (row0 + c, col0 + r) = (r, c), with stmatrix.trans (col0 a multiple of
// 8, N of 16). The backward's dS of the _dqt kernels (queries x keys) from dS^T's fragments.
template <class Tile, int N>
__device__ __forceinline__ void warpgroup_store_packed_transposed(const uint32_t (&packed)[N / 16][4],
                                                                  uint32_t tile_base, int row0,
                                                                  int col0, int thread_in_wg) {
  static_assert(Tile::Element::kBytes == 2 && N % 16 == 0, "16-bit tiles, whole k16 blocks");
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  // Matrix m of a k-step is the block (rows 16 warp + 8 (m % 2), cols 16 kk + 8 (m / 2)),
  // whose row j lies at tile row 16 kk + 8 (m / 2) + j.
  const int row = row0 + 8 * (lane / 16) + lane % 8;
  const int col = col0 + 16 * warp + 8 * ((lane / 8) % 2);
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk)
    ptx::stmatrix_x4_trans(tile_base + Tile::offset(row + 16 * kk, col), packed[kk]);
}

// Stores a 64 x N fp32 accumulator into rows [row0, row0 + 64), columns [col0, col0 + N) of
// Tile (col0 a multiple of 8):
//   f16 / bf16 tiles: converted (round to nearest), one stmatrix.x4 per 16 columns - the
//     backward's P and dS for the SS GEMMs that read them from shared memory (paper
//     Algorithm 3 lines 24-28), or a 16-bit O for a TMA store;
//   f32 tiles: as is, one 8-byte store per value pair (the layer tests' fp32 staging for the
//     tensor reduce-add, ptx::tma_reduce_add_4d; no kernel stores f32 tiles).
template <class Tile, int N>
__device__ __forceinline__ void warpgroup_store_acc(const float (&acc)[N / 2], uint32_t tile_base,
                                                    int row0, int col0, int thread_in_wg) {
  using Elem = typename Tile::Element;
  static_assert(N % 16 == 0, "whole 16-column blocks");
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  if constexpr (std::is_same_v<Elem, f32>) {
    const int row = row0 + 16 * warp + lane / 4, col = col0 + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        ptx::st_shared_v2_u32(tile_base + Tile::offset(row + 8 * h, col + 8 * i),
                              __float_as_uint(acc[4 * i + 2 * h]),
                              __float_as_uint(acc[4 * i + 2 * h + 1]));
  } else {
    static_assert(Elem::kIsMmaInput && Elem::kBytes == 2,
                  "an accumulator is stored to a typed f16, bf16 or f32 tile");
    // Packed as the A operands of an RS GEMM are: the fragment order stmatrix stores.
    uint32_t packed[N / 16][4];
    acc_to_a_operands<Elem::kMma == ptx::MmaType::BF16, N>(acc, packed);
    warpgroup_store_packed<Tile, N>(packed, tile_base, row0, col0, thread_in_wg);
  }
}

// Stores the TRANSPOSE of a 64 x N fp32 accumulator, converted to Tile's 16-bit type: tile
// element (row0 + c, col0 + r) = acc (r, c), with stmatrix.trans (col0 a multiple of 8; N a
// multiple of 8: a last 8-column group by an .x2). P^T or dS^T with the queries contiguous,
// for an SS GEMM that wants them K-major; the _kvt backward's dK^T and dV^T back to keys x
// head-dim tiles.
template <class Tile, int N>
__device__ __forceinline__ void warpgroup_store_acc_transposed(const float (&acc)[N / 2],
                                                               uint32_t tile_base, int row0,
                                                               int col0, int thread_in_wg) {
  using Elem = typename Tile::Element;
  static_assert(Elem::kIsMmaInput && Elem::kBytes == 2, "f16 or bf16 tiles");
  static_assert(N % 8 == 0, "whole 8-column groups");
  // Whole 16-column k-steps, each converted just before its store (k-step kk's columns are
  // tile rows row0 + 16 kk on).
  constexpr int kWhole = N / 16;
#pragma unroll
  for (int kk = 0; kk < kWhole; ++kk) {
    uint32_t packed[1][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      packed[0][i] = Elem::pack2(acc[8 * kk + 2 * i], acc[8 * kk + 2 * i + 1]);
    warpgroup_store_packed_transposed<Tile, 16>(packed, tile_base, row0 + 16 * kk, col0,
                                                thread_in_wg);
  }
  if constexpr (N % 16 != 0) {
    // The last 8 columns: matrices 0 and 1 of a k-step, by an .x2 (the addresses of lanes
    // 0-15), where warpgroup_store_packed_transposed puts them.
    const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
    const int row = row0 + 8 * (lane / 16) + lane % 8;
    const int col = col0 + 16 * warp + 8 * ((lane / 8) % 2);
    constexpr int kk = kWhole;
    const uint32_t r[2] = {Elem::pack2(acc[8 * kk], acc[8 * kk + 1]),
                           Elem::pack2(acc[8 * kk + 2], acc[8 * kk + 3])};
    ptx::stmatrix_x2_trans(tile_base + Tile::offset(row + 16 * kk, col), r);
  }
}

// Loads rows [row0, row0 + 64) of K-major Tile (its K columns) into A operands: one
// ldmatrix.x4 per k-step where load_a_operands needs four 32-bit loads.
template <class Tile, class Elem, int K>
__device__ __forceinline__ void warpgroup_load_a_operands(AOperands<Elem, K>& a, uint32_t tile_base,
                                                          int row0, int thread_in_wg) {
  static_assert(Elem::kBytes == 2, "ldmatrix moves 16-bit elements");
  static_assert(feeds_mma<typename Tile::Element>(Elem::kMma), "the tile holds A's type");
  static_assert(K <= Tile::kCols, "the tile has K columns");
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  const int row = row0 + 16 * warp + 8 * ((lane / 8) % 2) + lane % 8;
  const int col = 8 * (lane / 16);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::ldmatrix_x4(a.reg[kk], tile_base + Tile::offset(row, col + 16 * kk));
}

// Loads the A operands of A = T^T: A's 64 rows are columns [col0, col0 + 64) of Tile, its K
// columns are Tile's rows [0, K) (col0 a multiple of 8). ldmatrix.trans transposes each 8 x 8
// block on the way. dK = dS^T Q with dS^T in registers (RS) when dS is stored queries x keys.
template <class Tile, class Elem, int K>
__device__ __forceinline__ void warpgroup_load_a_operands_transposed(AOperands<Elem, K>& a,
                                                                     uint32_t tile_base, int col0,
                                                                     int thread_in_wg) {
  static_assert(Elem::kBytes == 2, "ldmatrix moves 16-bit elements");
  static_assert(feeds_mma<typename Tile::Element>(Elem::kMma), "the tile holds A's type");
  static_assert(K <= Tile::kRows, "the tile has K rows");
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  // Matrix m is A's block (rows 16w + 8 (m % 2), k 16 kk + 8 (m / 2)): the tile's block
  // (rows 16 kk + 8 (m / 2), cols col0 + 16w + 8 (m % 2)), whose row j lane 8 m + j gives.
  const int row = 8 * (lane / 16) + lane % 8;
  const int col = col0 + 16 * warp + 8 * ((lane / 8) % 2);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::ldmatrix_x4_trans(a.reg[kk], tile_base + Tile::offset(row + 16 * kk, col));
}

// The FP8 V transpose (paper 3.3): wgmma reads e4m3 operands K-major only, so O += P V needs
// V^T (head_dim rows x keys) where TMA brings V (keys x head_dim). Writes VtTile = V^T with
// the keys of every 16 in Fp8KOrder, the order acc_to_a<e4m3> gives P's K.
// Per block of 16 keys x 32 head-dim bytes: one ldmatrix.x4.trans reads it as 16-bit pairs
// (a register: 2 keys x 2 dims), two byte permutes per register pair regroup the bytes by dim
// (keys 2q, 2q+1, 8+2q, 9+2q of one dim = positions 4q..4q+3 of Fp8KOrder), one stmatrix.x4
// writes them as the 16-byte key runs of 16 rows of V^T. Executed by a whole warpgroup, the
// blocks dealt round-robin to its warps; the producer warpgroup does it in FA3.
template <class VTile, class VtTile>
__device__ __forceinline__ void warpgroup_transpose_v_e4m3(uint32_t v_base, uint32_t vt_base,
                                                           int thread_in_wg) {
  static_assert(std::is_same_v<typename VTile::Element, e4m3> &&
                    std::is_same_v<typename VtTile::Element, e4m3>,
                "e4m3 tiles");
  static_assert(VTile::kRows % 16 == 0 && VTile::kCols % 32 == 0, "whole 16 x 32 blocks");
  static_assert(VtTile::kRows == VTile::kCols && VtTile::kCols == VTile::kRows,
                "V^T is head_dim x keys");
  constexpr int kKeyBlocks = VTile::kRows / 16, kBlocks = kKeyBlocks * (VTile::kCols / 32);
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  const int m = lane / 8, j = lane % 8;
#pragma unroll
  for (int i = 0; i < (kBlocks + 3) / 4; ++i) {
    const int block = warp + 4 * i;
    if (kBlocks % 4 != 0 && block >= kBlocks) break;
    const int g = block % kKeyBlocks, h = block / kKeyBlocks;  // keys 16 g.., dims 32 h..
    uint32_t v[4];  // matrices: keys +0 / +8, dims +0 (v[0], v[1]) and +16 (v[2], v[3])
    ptx::ldmatrix_x4_trans(v,
                           v_base + VTile::offset(16 * g + 8 * (m % 2) + j, 32 * h + 16 * (m / 2)));
    // Lane (c = l / 4, q = l % 4) holds in v[0] the bytes (key 2q, dim 2c), (2q, 2c+1),
    // (2q+1, 2c), (2q+1, 2c+1); in v[1] the same for keys 8 + 2q, 9 + 2q.
    const uint32_t vt[4] = {ptx::prmt<0x6420>(v[0], v[1]),   // dim 2c
                            ptx::prmt<0x7531>(v[0], v[1]),   // dim 2c + 1
                            ptx::prmt<0x6420>(v[2], v[3]),   // dim 16 + 2c
                            ptx::prmt<0x7531>(v[2], v[3])};  // dim 17 + 2c
    ptx::stmatrix_x4(vt_base + VtTile::offset(32 * h + 16 * (m / 2) + 2 * j + m % 2, 16 * g), vt);
  }
}

}  // namespace fa3::tile
