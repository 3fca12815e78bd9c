// Launch of a forward kernel: tensor maps, parameter block, cuLaunchKernelEx on the caller's
// stream. No allocation, no synchronization.
#pragma once

#include "fa3/fa3.h"
#include "kernels/fwd_params.h"
#include "runtime/error.h"
#include "runtime/forward_problem.h"
#include "runtime/handle.h"
#include "runtime/kernel_registry.h"

namespace fa3 {

// A 4-D TMA map over (head_dim, seqlen, heads, batch) with boxes of 64 columns (one 128-byte
// swizzle row) x box_rows rows, 128B swizzle. Rows past seqlen read as zeros, are not written.
Error encode_tensor_map(const Driver& d, const fa3_tensor& t, const char* name, unsigned box_rows,
                        TensorMapBytes* out);

// The causal persistent scheduler walks the tiles in groups of this many (batch, head)
// pairs, longest first within a group, so that the K and V the running tiles read stay in
// L2. A power of two (at most pairs) near the larger of:
// - the pairs whose K and V fit in 8 MiB (the public FA3 takes 32 MiB: at 1k those groups
//   re-read a third of K and V from DRAM and ran 4-7% slower on an H100);
//   kv_bytes_per_pair is what a pair adds: with GQA/MQA the query heads of one K/V head
//   share its bytes (measured on an H100: the larger groups this gives took 0 to 1.2% fewer
//   cycles at GQA shapes, -1.2% at d64 GQA 8 4k);
// - sm_count / m_blocks + sm_count / 64 pairs: a tile per SM, and more as tiles get longer,
//   since the last group's longest tile must not run alone (at 16k one pair per group lost
//   5-8%).
// Then halved while the group's K and V pass 16 MiB, down to 3/4 of a tile per SM: the fill
// term gave 32 MiB at d128 16k (re-reading a quarter of K and V, 270 MB against 201 MB) and
// at d256 4k; 16 MiB ran +0.3% (d128 causal 16k), +1.0% (d256 4k) and +0.5% (d256 8k, 128
// tiles) in bursts on an H100.
// Group sizes between powers of two ran 4-9% slower on the paper grid (d128 8k: 3, 5 or 6
// pairs against 2, 4 or 8; d256 2k: 9, 10, 12 against 8 or 16), with the same DRAM and L2
// traffic; why is not known.
int32_t causal_l2_group(int64_t kv_bytes_per_pair, int64_t m_blocks, int64_t pairs, int sm_count);

// Everything but the launch: the kernel's parameter block and grid size (one CTA per tile,
// or per SM for a persistent kernel). Fails (before anything runs) when the driver rejects a
// tensor map.
Error build_forward_params(const Driver& d, const KernelInfo& kernel, const ForwardProblem& prob,
                           const fa3_tensor& q, const fa3_tensor& k, const fa3_tensor& v,
                           const fa3_tensor& o, float* lse, int sm_count, FwdParams* params,
                           unsigned* grid);

Error launch_forward(fa3_handle* h, const KernelInfo& kernel, const ForwardProblem& prob,
                     const fa3_tensor& q, const fa3_tensor& k, const fa3_tensor& v,
                     const fa3_tensor& o, float* lse, CUstream stream);

}  // namespace fa3
