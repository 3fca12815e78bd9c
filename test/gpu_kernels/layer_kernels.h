// Host entry points of the ptx/ and tile/ layer test kernels (layer_kernels.cu, built by
// nvcc for sm_90a and linked into fa3_tests). Each returns "" on success or the CUDA error.
// Matrices are row-major; 16-bit values are raw fp16/bf16 bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fwd_params.h"

namespace fa3test {

// TMA-loads the 64 x 64 box at load_coord (element coordinates, innermost first) of
// load_map into 128B-swizzled shared memory, returns it unswizzled (64 x 64), and TMA-stores
// the same tile at store_coord of store_map.
std::string run_tma_roundtrip(const fa3::TensorMapBytes& load_map,
                              const fa3::TensorMapBytes& store_map, const int load_coord[4],
                              const int store_coord[4], std::vector<uint16_t>* unswizzled);

// c (64 x n, fp32) = a (64 x k) * b^T, b (n x k): one warpgroup, SS wgmma, K-major tiles.
std::string run_gemm_ss(bool bf16, int n, int k, const std::vector<uint16_t>& a,
                        const std::vector<uint16_t>& b, std::vector<float>* c);

// o (64 x n, fp32) = round16(p) (64 x k) * v (k x n): p converted in registers from the
// accumulator layout, RS wgmma, v MN-major.
std::string run_gemm_rs(bool bf16, int n, int k, const std::vector<float>& p,
                        const std::vector<uint16_t>& v, std::vector<float>* o);

// The softmax's MUFU wrappers on each x: ex2_approx (2^x), lg2_approx (log2 x), rcp_approx
// (1/x); and every x through st_shared_v4_u32 / ld_shared_v4_u32 (as bits, four per thread).
struct MathResults {
  std::vector<float> ex2, lg2, rcp, shared_roundtrip;
};
std::string run_math_wrappers(const std::vector<float>& x, MathResults* out);

}  // namespace fa3test
