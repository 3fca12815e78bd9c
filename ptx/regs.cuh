// setmaxnreg (PTX ISA 9.7.19.5): moves registers between the warpgroups of a CTA. The whole
// warpgroup must execute it, and the kernel needs a register cap at entry
// (__launch_bounds__(threads, 1)) or ptxas ignores it (warning C7508, a build failure here).
#pragma once

namespace fa3::ptx {

template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(Regs >= 24 && Regs <= 256 && Regs % 8 == 0, "setmaxnreg takes 24..256, step 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(Regs >= 24 && Regs <= 256 && Regs % 8 == 0, "setmaxnreg takes 24..256, step 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

}  // namespace fa3::ptx
