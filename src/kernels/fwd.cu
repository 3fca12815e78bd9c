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
    !defined(FA3_CROSS_TILE) || !defined(FA3_EXP_AFTER_PV_WAIT) || !defined(FA3_HALF_BLOCKS) || \
    !defined(FA3_INT_MAX)
#error "build forward kernels through the Makefile: it defines FA3_* from the kernel name"
#endif

namespace {
struct ThisConfig {
  // Field by field, by name: a positional initializer would silently shift when a field is
  // added to FwdConfig anywhere but at its end.
  static constexpr fa3::FwdConfig value = [] {
    fa3::FwdConfig c;
    c.dtype = fa3::DType::FA3_DTYPE;
    c.head_dim = FA3_HEAD_DIM;
    c.block_m = FA3_BLOCK_M;
    c.block_n = FA3_BLOCK_N;
    c.stages = FA3_STAGES;
    c.consumer_warpgroups = FA3_CONSUMER_WARPGROUPS;
    c.causal = FA3_CAUSAL;
    c.overlap = FA3_OVERLAP;
    c.pingpong = FA3_PINGPONG;
    c.double_p = FA3_DOUBLE_P;
    c.persistent = FA3_PERSISTENT;
    c.three_stage = FA3_THREE_STAGE;
    c.warp_specialized = FA3_WARP_SPECIALIZED;
    c.b2_order = FA3_B2_ORDER;
    c.conditional_rescale = FA3_CONDITIONAL_RESCALE;
    c.int_max = FA3_INT_MAX;
    c.cluster_m = FA3_CLUSTER_M;
    c.ascending = FA3_ASCENDING;
    c.cross_tile = FA3_CROSS_TILE;
    c.q_warp = FA3_Q_WARP;
    c.three_q_buffers = FA3_THREE_Q_BUFFERS;
    c.q_warp_stores_o = FA3_Q_WARP_STORES_O;
    c.dynamic_schedule = FA3_DYNAMIC_SCHEDULE;
    c.exp_after_pv_wait = FA3_EXP_AFTER_PV_WAIT;
    c.half_blocks = FA3_HALF_BLOCKS;
    c.row_sum_mma = FA3_ROW_SUM_MMA;
    c.q_in_registers = FA3_Q_IN_REGISTERS;
    c.evict_first_q_o = FA3_EVICT_FIRST_Q_O;
    c.evict_last_kv = FA3_EVICT_LAST_KV;
    return c;
  }();
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
