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
