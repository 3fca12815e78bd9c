// Host entry points of the layer test kernels for what the backward pass (paper Algorithm 3)
// and the FP8 forward (paper 3.3) add to the ptx/ and tile/ layers: ldmatrix / stmatrix, typed
// tiles and fragments, e4m3 wgmma and its A-operand byte order, the FP8 V transpose, SS wgmma
// with a transposed A, bulk copies and reduce-adds, semaphores (layer_kernels_bwd_fp8.cu,
// built by nvcc for sm_90a and linked into fa3_tests). Each returns "" on success or the CUDA
// error. Matrices are row-major; 16-bit values are raw fp16/bf16 bits, e4m3 values raw bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fwd_params.h"

namespace fa3test {

// The ldmatrix / stmatrix forms, in the order of run_matrix_wrappers' results.
enum MatrixForm { kX1, kX2, kX4, kX1Trans, kX2Trans, kX4Trans, kMatrixForms };
inline int matrix_count(int form) { return 1 << (form % 3); }
inline bool matrix_trans(int form) { return form >= 3; }
// The shared-memory slot (16 bytes) of row r of the 4 stacked 8 x 8 matrices: the rows are
// scattered so that each lane's address is really used.
inline int matrix_row_slot(int r) { return (7 * r + 3) % 32; }

// src: 4 stacked 8 x 8 matrices of 16-bit values (32 x 8). For each form, one warp
//   loads them from scattered rows with ldmatrix: (*ld)[(form * 32 + lane) * 4 + reg];
//   stores the non-transposed fragments of the same matrices with stmatrix, back in the
//   stacked order: (*st)[form * 256 + 8 row + col] (rows beyond the form's matrices keep
//   their 0xffff fill).
std::string run_matrix_wrappers(const std::vector<uint16_t>& src, std::vector<uint32_t>* ld,
                                std::vector<uint16_t>* st);

// ptx::pack_e4m3x4 of every 4 consecutive x (x.size() a multiple of 4, at most 512).
std::string run_pack_e4m3(const std::vector<float>& x, std::vector<uint32_t>* packed);

// tile::warpgroup_store_acc (or _transposed) of a 64 x n fp32 accumulator `acc` into a tile
// prefilled with 0xff bytes, read back element by element (bits, zero-extended):
//   type 0 f16 / 1 bf16: 128 x 128 tile, n = 64, at (row0, col0) = (64, 64); transposed: the
//                        tile's (64 + c, 64 + r) = acc (r, c);
//   type 2 f32:          64 x 64 tile, n = 32, at (0, 32) (not transposed).
std::string run_store_acc(int type, bool transposed, const std::vector<float>& acc,
                          std::vector<uint32_t>* tile);

// bf16, with ldmatrix (tile::warpgroup_load_a_operands / _transposed):
//   c1 (64 x 64) = A B^T, A = rows 64..127 of a (128 x 64 tile);
//   c2 (64 x 64) = T^T B^T, T^T = columns 64..127 of t (64 x 128 tile: rows K);
//   b is 64 x 64 (n x k).
std::string run_ldmatrix_gemm(const std::vector<uint16_t>& a, const std::vector<uint16_t>& t,
                              const std::vector<uint16_t>& b, std::vector<float>* c1,
                              std::vector<float>* c2);

// e4m3 SS wgmma (k32): c (64 x 224) = a (64 x 128) * b^T, b (224 x 128).
std::string run_gemm_ss_e4m3(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                             std::vector<float>* c);

// e4m3 RS wgmma from an accumulator: o (64 x 64) = e4m3(p) (64 x 224, converted in registers
// by tile::acc_to_a<e4m3>) * V, with vt (64 x 224) = V^T given in Fp8KOrder.
std::string run_gemm_rs_e4m3(const std::vector<float>& p, const std::vector<uint8_t>& vt,
                             std::vector<float>* o);

// The FP8 V transpose: v (160 keys x 128 dims, e4m3) -> tile::warpgroup_transpose_v_e4m3 ->
// *vt (128 x 160, read back); then o (64 x 128) = e4m3(p) (64 x 160) * v through it.
std::string run_fp8_v_transpose(const std::vector<float>& p, const std::vector<uint8_t>& v,
                                std::vector<uint8_t>* vt, std::vector<float>* o);

// The backward's SS GEMMs on two warpgroups:
//   dv (128 x 64) = init + P^T dO (tile::warpgroup_gemm_ss_atb, bf16): p 64 x 128, dout 64 x 64,
//     warpgroup w computing keys [64 w, 64 w + 64);
//   dq (64 x 64) = dS K (tile::warpgroup_gemm_ss_ab, f16): ds 64 x 128, k 128 x 64.
std::string run_backward_gemms(const std::vector<uint16_t>& p, const std::vector<uint16_t>& dout,
                               const std::vector<float>& init, const std::vector<uint16_t>& ds,
                               const std::vector<uint16_t>& k, std::vector<float>* dv,
                               std::vector<float>* dq);

// Bulk copies and reduce-adds, `ctas` CTAs at once. CTA c holds a 64 x 64 accumulator
// contrib[c] (row-major, 4096 floats each) and a vector vec[c] (256 floats each):
//   frag_sum (4096 floats + a poisoned tail) += each accumulator staged in fragment order
//     (tile::AccStagingTile) by bulk_reduce_add_f32 (odd CTAs the L2-hinted form);
//   vec_sum (256) += each vec[c], brought in by bulk_copy_global_to_shared, and each vec[c]
//     copied back out to vec_copy[c] by bulk_copy_shared_to_global;
//   the fp32 tensor of row_map (rows x 64, fp32, box 32 x 64, 128B swizzle) += each
//     accumulator at rows [30 (c % 3), + 64), staged row-major (tile::warpgroup_store_acc
//     into an f32 tile) and added by tma_reduce_add_4d: rows past the tensor are dropped.
// The device buffers are the caller's (initialized and poisoned there).
std::string run_bulk_reduce(int ctas, const float* contrib, const float* vec, float* frag_sum,
                            float* vec_sum, float* vec_copy, const fa3::TensorMapBytes& row_map);

// `ctas` CTAs add their 4 floats add[c] to sum (4 floats) one after another, in CTA order:
// CTA c waits until *counter == c (ld_acquire_gpu), bulk reduce-adds, waits for the add to
// complete, then releases counter + 1 (red_add_release_gpu). counter starts at 0.
std::string run_ordered_reduce(int ctas, const float* add, float* sum, int32_t* counter);

}  // namespace fa3test
