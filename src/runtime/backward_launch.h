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

// The split last wave of a persistent non-causal kernel (BwdConfig::splits_last_wave;
// bwd_piece_at, bwd_config.h): the tiles that go whole (`first`), the chunks' steps, and the
// draws (first + chunks). None (first = draws = tiles) for other kernels, ordered adds, tiles
// of fewer than kSplitMinTileSteps steps, a last wave that is full or nearly so (its chunks
// would be over 3/4 of a tile), last tiles of 2^31 steps or more (the kernels count them in
// 32 bits), a workspace without room (WorkspaceRegions: none for a key no compiled kernel
// splits, backward_key_splits, and none for more than kSplitMaxCtas CTAs), or tiles,
// tile_steps or ctas below 1.
// Below this many steps a tile the pieces' own costs (a K/V load and pipeline fill each, the
// fp32 partials out and back) outweigh the tail they shorten: at d128 the paper grid's 1k
// tiles (13 steps, chunks of 7) lost 0.6% split in three A/Bs, its 2k ones (26) gained
// 0.5-1%; whole again, the 1k ones ran 0.5-0.6% faster (docs/perf-history.md v90a, v91).
// Between them (v92: split from 14 steps / never, d128 non-causal, seqlen_q 1120-1920) the
// split gained 1.1-1.6% where the last wave held 36 of 132 tiles (14 and 22 steps), 0.2% at 72
// tiles of 24 steps and lost 0.4-0.5% at 72 of 16 (which 16 splits); at 100 tiles of 15 and 20
// neither library split (chunks over 3/4 of a tile): 1.000, the A/B's floor. What a split
// saves follows the last wave as much as the tile's steps, within ~1.5% either way; no rule
// fits every reading better, so 16 stays.
constexpr int64_t kSplitMinTileSteps = 16;
struct BackwardSplitPlan {
  int64_t first = 0, draws = 0, chunk = 0;
};
BackwardSplitPlan backward_split_plan(const BwdConfig& c, const BackwardProblem& prob,
                                      int64_t tiles, int64_t tile_steps, int64_t ctas);

// Whether the main kernel and the postprocess are launched by programmatic dependent launch
// (each scheduled while the kernel before it finishes, waiting in the kernel for what that
// one wrote). Off since v82: with it, 40 calls on 40 streams at once hung the GPU (calls that
// never finished; the tests "fa3_backward: streams made and dropped per call..." and "...
// streams per call..." in test_backward_gpu.cpp); with ordinary launches they pass (v82: 20 of
// 20 runs; v83-v85: 22 of 22 processes). Off, the backward measured 0.986x of v81's
// in one process (bf16, H200, 1k-16k; 0.964x at d128 1k-2k, where the persistent picks lost
// the postprocess's early start, out of the kernels since v84): docs/perf-history.md v82.
// The hang does not need fa3's kernels (v85; lab/pdl_repro, docs/perf-history.md v85): kernels
// that do nothing but wait reproduce it on an H200 (driver 580.159.04), 40 streams each with a
// preprocess that says griddepcontrol.launch_dependents at its start and a main kernel
// launched programmatically after it, with one CTA an SM (the whole register file; 132 CTAs)
// that waits in griddepcontrol.wait. Each of 8 such runs hung in its first two rounds of 40
// calls: with or without allocations between the calls, with the postprocess launched
// programmatically too or not, and with the main kernel's own trigger at its start, its end or
// nowhere. With the postprocess's programmatic launch alone, or with the preprocess not
// triggering early, 10 rounds passed (one run each). With fa3's kernels the hang is
// the same: the GPU wedged, a memset on another stream not run in 5 s, even the one-tile d128
// kernel whose CTAs never wait for each other. That no launch rule explains it (every
// dependent grid waits only for grids whose CTAs have all started) is why it stays off, not
// only the edge that hangs.
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
