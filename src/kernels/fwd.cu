// One forward kernel per compilation: the Makefile passes the config as FA3_* definitions
// derived from the kernel's name (src/kernels/kernels.mk), so each cubin holds exactly the
// extern "C" kernel the runtime looks up by that name.
#include "kernels/fwd.cuh"

#if !defined(FA3_KERNEL_NAME) || !defined(FA3_DTYPE) || !defined(FA3_HEAD_DIM) ||          \
    !defined(FA3_BLOCK_M) || !defined(FA3_BLOCK_N) || !defined(FA3_STAGES) ||              \
    !defined(FA3_CONSUMER_WARPGROUPS) || !defined(FA3_CAUSAL) || !defined(FA3_OVERLAP) ||  \
    !defined(FA3_PINGPONG) || !defined(FA3_DOUBLE_P) || !defined(FA3_PERSISTENT) ||        \
    !defined(FA3_THREE_STAGE) || !defined(FA3_WARP_SPECIALIZED) || !defined(FA3_B2_ORDER) || \
    !defined(FA3_CONDITIONAL_RESCALE) || !defined(FA3_CLUSTER_M) || !defined(FA3_ASCENDING) || \
    !defined(FA3_CROSS_TILE)
#error "build forward kernels through the Makefile: it defines FA3_* from the kernel name"
#endif

namespace {
struct ThisConfig {
  static constexpr fa3::FwdConfig value = {
      fa3::DType::FA3_DTYPE, FA3_HEAD_DIM, FA3_BLOCK_M,  FA3_BLOCK_N, FA3_STAGES,
      FA3_CONSUMER_WARPGROUPS, FA3_CAUSAL, FA3_OVERLAP, FA3_PINGPONG, FA3_DOUBLE_P,
      FA3_PERSISTENT, FA3_THREE_STAGE, FA3_WARP_SPECIALIZED, FA3_B2_ORDER,
      FA3_CONDITIONAL_RESCALE, FA3_CLUSTER_M, FA3_ASCENDING, FA3_CROSS_TILE};
};
}  // namespace

// A cluster's size is part of the cubin: the launch cannot get it wrong.
#if FA3_CLUSTER_M > 1
#define FA3_CLUSTER_DIMS __cluster_dims__(FA3_CLUSTER_M, 1, 1)
#else
#define FA3_CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(ThisConfig::value.threads(), 1) FA3_CLUSTER_DIMS
    FA3_KERNEL_NAME(const __grid_constant__ fa3::FwdParams params) {
  fa3::fwd_kernel<ThisConfig>(params);
}
