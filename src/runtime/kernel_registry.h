// The kernels compiled into the library: their extern "C" names, their cubins (embedded at
// build time) and the configs their names encode.
//
// Forward kernel names: fa3_fwd_<dtype>_d<head_dim>_m<block_m>_n<block_n>_s<stages>_w<consumer
// warpgroups>[_ov|_ov3][_p2|_b2][_cr][_im][_ls][_ew][_as][_hb][_pp][_ps][_xt][_qw][_q3][_os][_dy][_qr][_ef][_el][_c2][_nows][_causal],
// e.g. fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal (_ov: intra-warpgroup 2-stage
// GEMM-softmax pipelining, _ov3: 3-stage pipelining, _p2: with two P register buffers, _b2:
// the 2-stage loop in the order of the paper's Appendix B.2 SASS, _cr: row max kept until it
// grows by more than 2^8, O rescaled only then, _im: the row maxima by an integer max
// of the scores' bits, _ls: the row sums by the PV GEMM (ones after
// each V stage), _ew: exponentials after the PV wait, _as: key
// blocks visited first to last, _hb: half-width blocks where a warpgroup's upper half is
// masked, _pp: pingpong scheduling, _ps: persistent grid, _xt: tiles pipelined into each
// other, _qw: Q loaded by a producer warp of its own, _q3: three Q buffers, _os: O stored by
// the Q warp, _dy: non-causal tiles handed out through a counter, _qr: QK^T with Q from
// registers, _ef: Q loads and O stores
// evict-first in L2, _el: K/V loads evict-last in L2, _c2: clusters of 2 CTAs sharing K/V
// through TMA multicast, _nows: no producer warpgroup). The name is the only place a kernel's config is
// written down for the host: the Makefile derives the compile definitions from it, and the
// runtime parses it back.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kernels/fwd_config.h"

namespace fa3 {

enum class Direction { Forward };

// The most forward kernels the production set (FWD_PRODUCTION_KERNELS, src/kernels/kernels.mk)
// may hold: the tuning table's picks and the reference kernels of the paper's ablation, each
// a few seconds of every clean build (test_registry.cpp enforces it; README, "Build time").
constexpr int kProductionForwardBudget = 48;

struct KernelInfo {
  std::string name;
  Direction direction = Direction::Forward;
  FwdConfig fwd;                      // valid when direction == Forward
  const unsigned char* cubin = nullptr;
  size_t cubin_size = 0;
};

// Parses a forward kernel name; nullopt when it does not follow the grammar or names a
// config the kernel code cannot be built with (fwd_config_is_valid).
std::optional<FwdConfig> parse_fwd_kernel_name(const std::string& name);
std::string fwd_kernel_name(const FwdConfig& c);

const char* dtype_name(DType d);  // "f16" / "bf16"

// All kernels embedded in this library, in name order.
const std::vector<KernelInfo>& compiled_kernels();
const KernelInfo* find_compiled_kernel(const std::string& name);

}  // namespace fa3
