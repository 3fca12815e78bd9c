// One backward kernel family member per compilation: the Makefile passes the main kernel's
// name (-DFA3_KERNEL_NAME=fa3_bwd_...), its config is parsed out of that name at compile time,
// and the cubin holds the three extern "C" kernels of a backward call: the name (the main
// loop), <name>_pre and <name>_post; and where BwdConfig::causal_last_first, <name>_lf, the
// main loop of the causal calls that add dQ the last K/V block's first (backward_add_order:
// deterministic calls and the default mode's small ones; the Makefile passes
// FA3_BWD_LAST_FIRST).
#include "kernels/bwd_config.h"
#include "kernels/bwd_kernel.cuh"

#ifndef FA3_KERNEL_NAME
#error "build backward kernels through the Makefile: it defines FA3_KERNEL_NAME"
#endif
#define FA3_STRINGIFY_(x) #x
#define FA3_STRINGIFY(x) FA3_STRINGIFY_(x)
#define FA3_CAT_(a, b) a##b
#define FA3_CAT(a, b) FA3_CAT_(a, b)

namespace {
constexpr fa3::BwdNameParse kParsed = fa3::parse_bwd_name(FA3_STRINGIFY(FA3_KERNEL_NAME));
static_assert(kParsed.ok, "FA3_KERNEL_NAME is not a valid backward kernel name (bwd_config.h)");
struct ThisConfig {
  static constexpr fa3::BwdConfig value = kParsed.config;
};
#ifndef FA3_BWD_LAST_FIRST
#error "build backward kernels through the Makefile: it defines FA3_BWD_LAST_FIRST"
#endif
static_assert(kParsed.config.causal_last_first() == (FA3_BWD_LAST_FIRST != 0),
              "the Makefile's FA3_BWD_LAST_FIRST disagrees with BwdConfig::causal_last_first");
#if FA3_BWD_LAST_FIRST
constexpr fa3::BwdConfig last_first_of(fa3::BwdConfig c) {
  c.last_first = true;
  return c;
}
struct ThisConfigLastFirst {
  static constexpr fa3::BwdConfig value = last_first_of(kParsed.config);
};
#endif
}  // namespace

extern "C" __global__ void __launch_bounds__(ThisConfig::value.threads(), 1)
    FA3_KERNEL_NAME(const __grid_constant__ fa3::BwdParams params) {
  fa3::bwd_kernel<ThisConfig>(params);
}

#if FA3_BWD_LAST_FIRST
extern "C" __global__ void __launch_bounds__(ThisConfig::value.threads(), 1)
    FA3_CAT(FA3_KERNEL_NAME, _lf)(const __grid_constant__ fa3::BwdParams params) {
  fa3::bwd_kernel<ThisConfigLastFirst>(params);
}
#endif

extern "C" __global__ void __launch_bounds__(fa3::kBwdAuxThreads)
    FA3_CAT(FA3_KERNEL_NAME, _pre)(const __grid_constant__ fa3::BwdParams params) {
  fa3::bwd_preprocess<ThisConfig>(params);
}

extern "C" __global__ void __launch_bounds__(fa3::kBwdAuxThreads)
    FA3_CAT(FA3_KERNEL_NAME, _post)(const __grid_constant__ fa3::BwdParams params) {
  fa3::bwd_postprocess<ThisConfig>(params);
}
