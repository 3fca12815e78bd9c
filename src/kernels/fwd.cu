// One forward kernel per compilation: the Makefile passes the kernel's name alone
// (-DFA3_KERNEL_NAME=fa3_fwd_...), and its config is parsed out of that name here, at
// compile time, by the registry every other reader of names uses (fwd_names.h). Each cubin
// holds exactly the extern "C" kernel the runtime looks up by that name.
#include "kernels/fwd_kernel.cuh"
#include "kernels/fwd_names.h"

#ifndef FA3_KERNEL_NAME
#error "build forward kernels through the Makefile: it defines FA3_KERNEL_NAME"
#endif
#define FA3_STRINGIFY_(x) #x
#define FA3_STRINGIFY(x) FA3_STRINGIFY_(x)

namespace {
constexpr fa3::FwdNameParse kParsed = fa3::parse_fwd_name(FA3_STRINGIFY(FA3_KERNEL_NAME));
static_assert(kParsed.ok, "FA3_KERNEL_NAME is not a valid forward kernel name (fwd_names.h)");
struct ThisConfig {
  static constexpr fa3::FwdConfig value = kParsed.config;
};
}  // namespace

// (A lab kernel with clusters, cluster_m > 1, gets its cluster shape from the launch:
// forward_launch.cpp sets it from the same parsed name.)
extern "C" __global__ void __launch_bounds__(ThisConfig::value.threads(), 1)
    FA3_KERNEL_NAME(const __grid_constant__ fa3::FwdParams params) {
  fa3::fwd_kernel<ThisConfig>(params);
}
