// Launch of a backward call: the preprocess, the main kernel and the postprocess of one
// backward kernel's cubin, in order on the caller's stream, each after the one before
// (kBackwardProgrammaticLaunch). Prepared first (the kernel's module loaded, the parameters
// built), so that whatever can fail does before the handle grows a workspace for the call;
// then launched with no allocation and no synchronization.
#pragma once

#include "fa3/fa3.h"
#include "kernels/bwd_params.h"
#include "runtime/backward_problem.h"
#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/kernel_registry.h"

namespace fa3 {

// Grid sizes of a backward call's three kernels (x, y, z).
struct BackwardGrids {
  unsigned pre[3], main[3], post[3];
};

// Whether the main kernel orders its dQ adds as the deterministic mode does (BwdParams::
// ordered_adds): when asked to, and for small causal calls (up to 512 queries and keys, 1024
// at head dim 64), where that is faster.
bool backward_ordered_adds(const BwdConfig& c, const BackwardProblem& prob);

// BwdParams::ordered_adds: 0 without ordered adds, else their order (BwdOrder): the causal
// calls of a kernel with an _lf entry (d64) the last K/V block's adds first (the public FA3's
// order), deterministic ones always, the default mode's small ones from 6 query blocks; the
// other causal calls and non-causal calls K/V block order.
int32_t backward_add_order(const BwdConfig& c, const BackwardProblem& prob);

// The (batch, K/V head) pairs of a section of the main kernel's CTA order (bwd_tile_at,
// bwd_config.h): 1 (each pair's K/V blocks in turn) but for causal calls or ordered adds,
// where as many pairs as keep their Q, dO and dQ accumulator within 40 MiB of L2 (a power of
// two), halved for ordered adds at head dims 64 and 128 where that is 8 pairs or more.
int backward_l2_section(const BwdConfig& c, const BackwardProblem& prob);

// Whether the main kernel and the postprocess are launched by programmatic dependent launch
// (each scheduled while the kernel before it finishes, waiting in the kernel for what that
// one wrote). Off since v82: with it, 40 calls on 40 streams at once hung the GPU (calls that
// never finished, each with its own workspace; the test "fa3_backward: streams made and
// dropped per call..." in test_backward_gpu.cpp), and so did it with only the main kernel's
// launch programmatic, or only the postprocess's; with ordinary launches none did (20 of 20
// runs). Not understood yet: by the launch rules (a dependent grid starts once every CTA of
// the one before has triggered or ended) and in-order dispatch, each wait in the three kernels
// is for CTAs that have started. Off, the backward measured 0.986x of v81's in one process
// (bf16, H200, 1k-16k; 0.964x at d128 1k-2k, where the persistent picks lose the
// postprocess's early start): docs/perf-history.md v82. v83: with every tile of the ordered
// adds drawn (bwd_draw_tile), programmatic launches still failed that test: the handle's-pool
// section hung (CUDA_DEVICE_MAX_CONNECTIONS=1), and the caller-workspace sections hit illegal
// addresses (8 and 32 connections) that the test's own race may explain (its poison fill, on
// the legacy stream, was not awaited then); with ordinary launches 6 of 6 processes passed.
constexpr bool kBackwardProgrammaticLaunch = false;

// A backward call ready to launch but for its workspace.
struct BackwardCall {
  const KernelInfo* kernel = nullptr;
  BackwardFunctions functions;  // loaded in the context the call was prepared in
  BwdParams params;             // without the workspace's regions
  BackwardGrids grids;
};

// Loads the kernel's module in `context` (current) the first time and builds the call's
// parameters and grids.
Error prepare_backward(fa3_handle* h, const Context& context, const KernelInfo& kernel,
                       const BackwardProblem& prob, const fa3_tensor& q, const fa3_tensor& k,
                       const fa3_tensor& v, const fa3_tensor& o, const fa3_tensor& dout,
                       const float* lse, const fa3_tensor& dq, const fa3_tensor& dk,
                       const fa3_tensor& dv, BackwardCall* out);

// Launches a prepared call's three kernels on `stream` (of the context it was prepared in,
// current) with `workspace`.
Error launch_backward(fa3_handle* h, const BackwardProblem& prob, const BackwardCall& call,
                      CUdeviceptr workspace, CUstream stream);

}  // namespace fa3
