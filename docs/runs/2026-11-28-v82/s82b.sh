#!/bin/bash
# v82b: the backward's three kernels as ordinary launches (kBackwardProgrammaticLaunch off),
# after h200_hang2-4 (any programmatic launch hung 40 calls on 40 streams; ordinary launches
# passed 5 of 5).
#   1. the hanging sequence (the threads test, then every section of the churn test) in up to
#      10 processes, stopping at the first that fails or hangs;
#   2. every backward GPU test but the [large] ones;
#   3. this library / v81's (.prev/libfa3_v81.so, v81's sources: programmatic launches, the
#      persistent grids on 130 SMs) / the public FA3, bf16, every head dim and mask, 1k-16k.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so .prev/libfa3_v81.so
NEW_TESTS='fa3_backward: streams made and dropped per call pass the handle*,fa3_backward: threads and streams at once*'
for i in $(seq 1 10); do
  step run 80 build/fa3_tests --durations yes "$NEW_TESTS"
  { echo "== run $i"; cat "$OUT/run.log"; } >> "$OUT/churn.log"
  grep -q "^rc=0" "$OUT/run.log" || break
done
rm -f "$OUT/run.log"
step backward 300 build/fa3_tests --durations yes '[gpu][backward]~[large]'
AB_DTYPES=bf16 ab_bwd ab .prev/libfa3_v81.so 64,128,256 0,1 1024,2048,4096,8192,16384 6
