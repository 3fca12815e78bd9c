// Index maps of the fragment layouts that code outside the kernel needs too: host tests,
// and host-side references of workspaces kept in these orders. Plain C++ (host and device).
//   Fp8KOrder         the K order of the FP8 PV GEMM (fragment.cuh explains it)
//   AccFragmentOrder  a warpgroup's 64 x N fp32 accumulator in fragment order
//                     (AccStagingTile in smem_tile.cuh; the backward's dQ accumulator)
#pragma once

#if defined(__CUDACC__)
#define FA3_TILE_HOST_DEVICE __host__ __device__
#else
#define FA3_TILE_HOST_DEVICE
#endif

namespace fa3::tile {

// Position k of the A operand's K and of V^T's rows holds key key_at(k) of the block: in each
// 16, position 4q + j holds key 2q + (j % 2) + 8 (j / 2), where the accumulator of S keeps it.
struct Fp8KOrder {
  FA3_TILE_HOST_DEVICE static constexpr int key_at(int k) {
    return (k & ~15) + 2 * ((k % 16) / 4) + (k % 2) + 8 * ((k % 4) / 2);
  }
};

// Float index of value e of thread t of the warpgroup: the 4 values of each 8-column group i
// (rows r and r + 8, two columns each) are the 16 bytes at float 512 i + 4 t.
struct AccFragmentOrder {
  FA3_TILE_HOST_DEVICE static constexpr int index(int t, int e) { return (e / 4) * 512 + t * 4 + e % 4; }
  // Row and column of the accumulator value at float index i (the inverse of index; thread
  // t = (i % 512) / 4, warp w = t / 32, lane l = t % 32, row 16w + l/4 + 8 half, col 8 group +
  // 2 (l % 4) + (i % 2)).
  FA3_TILE_HOST_DEVICE static constexpr int row_of(int i) {
    return 16 * ((i % 512) / 128) + ((i % 128) / 4) / 4 + 8 * ((i % 4) / 2);
  }
  FA3_TILE_HOST_DEVICE static constexpr int col_of(int i) {
    return 8 * (i / 512) + 2 * (((i % 128) / 4) % 4) + i % 2;
  }
};

}  // namespace fa3::tile
