#!/bin/bash
# v85, second probe of the programmatic-launch hang (build/diag/PDL/fa3_tests from
# docs/runs/2026-11-29-v85/build_pdl_diag.sh with B=build, the tests' hang report now saying
# whether a memset on another stream still runs). nvidia-smi sampled every 2 s meanwhile.
#  1. the non-deterministic 1000-row test case whole (v85 s85_a: its pool section hung);
#  2. its pool section alone;
#  3. 1. with CUDA_DEVICE_MAX_CONNECTIONS=32.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum build/diag/PDL/fa3_tests | tee -a "$OUT/gpu.txt"
( while :; do nvidia-smi --query-gpu=timestamp,utilization.gpu,power.draw,clocks.sm,memory.used --format=csv,noheader; sleep 2; done ) > "$OUT/smi.log" 2>&1 &
smi=$!
T='*1000 rows (no waits between*'
POOL="no waiting between them, with the handle's: a workspace is passed on only once its call has run"
probe() {  # probe NAME RUNS CMD...
  local name=$1 runs=$2; shift 2
  echo "== $name starts $(date +%T)" >> "$OUT/smi.log"
  if churn "$name" "$runs" "$@"; then rm -f "$OUT/run.log"; else mv "$OUT/run.log" "$OUT/failed_$name.log"; fi
}
probe whole 2 build/diag/PDL/fa3_tests --durations yes -w NoTests "$T"
probe pool_alone 3 build/diag/PDL/fa3_tests --durations yes -w NoTests "$T" -c "$POOL"
probe connections32 2 env CUDA_DEVICE_MAX_CONNECTIONS=32 build/diag/PDL/fa3_tests --durations yes -w NoTests "$T"
kill $smi
cd "$OUT" && cat gpu.txt churn.log > logs.txt 2>/dev/null; rm -f gpu.txt churn.log; ls -la
