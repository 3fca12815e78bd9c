#!/bin/bash
# v85: lab/pdl_repro (build/pdl_repro) in six forms, each bounded. Ran with the first form of
# the program (commit of s85_b: no setmaxnreg; its 5th argument then ALLOC=1, 1 MiB a call)
# (75 s; the program's own bound is 60 s a round), all output in $OUT/repro.log.
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/repro.log"
for args in "none 40 10 32" "both 40 10 32" "both 40 10 132" "main 40 10 32" "post 40 10 32" "both 40 10 32 1"; do
  s=$SECONDS
  timeout --signal=KILL 75 build/pdl_repro $args >> "$OUT/repro.log" 2>&1
  echo "rc=$? $((SECONDS - s)) s ($args)" >> "$OUT/repro.log"
done
cat "$OUT/repro.log"
