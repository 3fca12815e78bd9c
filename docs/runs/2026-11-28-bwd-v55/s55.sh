#!/bin/bash
# session 55.
#   s55.sh a: v55a' (dK_j / dV_j stored from registers: the library built with p.dkv_tma = 0,
#             .prev/libfa3_dkvregs.so, as fa3-prev) against the shipped library (fa3) and the
#             public FA3: every head dim and mask, 1k-16k, 8 rounds (d256 2k / 8k, 6 rounds)
#   s55.sh b: the deterministic mode's levers on the host side, each library as fa3-prev (its
#             mode as fa3-prev-det) against the shipped one: the L2 section budget 20 MiB
#             instead of 40 (.prev/libfa3_l2b20.so; d64 and d128, both masks, 2k-16k, 6
#             rounds) and d128 causal on the one-tile _p32 from 2048 query rows instead of
#             6144 (.prev/libfa3_p32from2k.so; 2k / 4k, 8 rounds)
#   s55.sh c: v55b (ordered adds' L2 sections of 20 MiB, build/) against the shipped library
#             (.prev/libfa3.so), both modes, d64 and d128, both masks, 1k-16k, 6 rounds; its
#             deterministic mode against 10 MiB sections (.prev/libfa3_ord10.so), 2k-8k; the
#             backward GPU tests
#   s55.sh d: v55b as kept (ordered adds halve sections of 8 pairs or more; build/) against
#             the shipped library: d256 deterministic 1k-4k, d64 causal 512 / 1k (default
#             ordered adds); the deterministic and float64 backward tests
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step, ab_bwd
gpu_run_header build/libfa3.so "${@:2}"
if [ "$1" = a ]; then
  ab_bwd ab_regs .prev/libfa3_dkvregs.so 64,128 0,1 1024,2048,4096,8192,16384 8
  ab_bwd ab_regs_d256 .prev/libfa3_dkvregs.so 256 0,1 2048,8192 6
elif [ "$1" = b ]; then
  ab_bwd ab_l2b20 .prev/libfa3_l2b20.so 64,128 0,1 2048,4096,8192,16384 6 fa3,fa3-det,fa3-prev,fa3-prev-det
  ab_bwd ab_p32from2k .prev/libfa3_p32from2k.so 128 1 2048,4096 8 fa3,fa3-det,fa3-prev,fa3-prev-det
elif [ "$1" = c ]; then
  ab_bwd ab_ord20 .prev/libfa3.so 64,128 0,1 1024,2048,4096,8192,16384 6 fa3,fa3-det,fa3-prev,fa3-prev-det
  ab_bwd ab_ord10 .prev/libfa3_ord10.so 64,128 0,1 2048,4096,8192 6 fa3-det,fa3-prev-det
  step tests 230 build/fa3_tests '[gpu][backward]~[large]'
elif [ "$1" = d ]; then
  step det_tests 100 build/fa3_tests 'fa3_backward is deterministic in deterministic mode*'
  AB_DTYPES=bf16 ab_bwd ab_d256 .prev/libfa3.so 256 0,1 1024,2048,4096 5 fa3-det,fa3-prev-det
  AB_DTYPES=bf16 ab_bwd ab_d64c_small .prev/libfa3.so 64 1 512,1024 6 fa3,fa3-prev
  step f64_tests 100 build/fa3_tests 'fa3_backward matches the float64 reference'
fi
cd "$OUT" && tar czf "run_$1.tgz" --remove-files -- *.log *.txt */ 2>/dev/null; ls "$OUT"
