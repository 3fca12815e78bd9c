// Element types of tiles and fragments: tags that carry what the layouts and the tensor cores
// need to know of a type (bytes per element, the wgmma type and K, how a fragment packs).
// Tiles and fragments take one as their first parameter, so a tile of e4m3 cannot feed a bf16
// GEMM and a P converted for the FP8 PV GEMM cannot be used as a 16-bit one.
//   f16, bf16  16-bit inputs and P / dS operands (paper Algorithms 1 and 3)
//   e4m3       FP8 inputs and P (paper 3.3); wgmma k = 32, K-major operands only
//   f32        fp32 values staged in shared memory; no wgmma (the layer tests'; the backward
//              stages dQ in its own untyped AccStagingTile)
//   b16        16 bits of either kind: layout only, for code not yet typed by f16 / bf16
//              (SwizzledTile, which the forward kernel uses, is a tile of b16)
#pragma once

#include <stdint.h>

#include <type_traits>

#include "ptx/math.cuh"
#include "ptx/wgmma.cuh"

namespace fa3::tile {

struct f16 {
  static constexpr int kBytes = 2;
  static constexpr ptx::MmaType kMma = ptx::MmaType::F16;
  static constexpr bool kIsMmaInput = true;
  // Two values as one b32 of a fragment: `lo` in bits 0-15 (the lower column or k).
  __device__ static __forceinline__ uint32_t pack2(float lo, float hi) {
    return ptx::pack_f16x2(lo, hi);
  }
};

struct bf16 {
  static constexpr int kBytes = 2;
  static constexpr ptx::MmaType kMma = ptx::MmaType::BF16;
  static constexpr bool kIsMmaInput = true;
  __device__ static __forceinline__ uint32_t pack2(float lo, float hi) {
    return ptx::pack_bf16x2(lo, hi);
  }
};

struct e4m3 {
  static constexpr int kBytes = 1;
  static constexpr ptx::MmaType kMma = ptx::MmaType::E4M3;
  static constexpr bool kIsMmaInput = true;
  // Four values as one b32 of a fragment, b0 in bits 0-7; saturated to +-448.
  __device__ static __forceinline__ uint32_t pack4(float b0, float b1, float b2, float b3) {
    return ptx::pack_e4m3x4(b0, b1, b2, b3);
  }
};

struct f32 {
  static constexpr int kBytes = 4;
  static constexpr bool kIsMmaInput = false;
};

struct b16 {
  static constexpr int kBytes = 2;
  static constexpr bool kIsMmaInput = false;
};

// Whether a tile of Elem can be an operand of a wgmma of type T: its own type, and b16 for
// either 16-bit type (the untyped SwizzledTile).
template <class Elem>
__host__ __device__ constexpr bool feeds_mma(ptx::MmaType t) {
  if constexpr (Elem::kIsMmaInput) {
    return Elem::kMma == t;
  } else {
    return Elem::kBytes == 2 && (t == ptx::MmaType::F16 || t == ptx::MmaType::BF16);
  }
}

}  // namespace fa3::tile
