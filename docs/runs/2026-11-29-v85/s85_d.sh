#!/bin/bash
# v85: lab/pdl_repro (build/pdl_repro, built as its header says: setmaxnreg, allocations and
# legacy-stream fills) in six forms, each bounded
# (75 s; the program's own bound is 60 s a round), all output in $OUT/repro.log.
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/repro.log"
for args in "none 40 10 32 9 2" "both 40 10 32 0 0" "both 40 10 32 9 2" "both 40 10 132 9 2" "post 40 10 32 9 2" "main 40 10 32 9 2"; do
  s=$SECONDS
  timeout --signal=KILL 75 build/pdl_repro $args >> "$OUT/repro.log" 2>&1
  echo "rc=$? $((SECONDS - s)) s ($args)" >> "$OUT/repro.log"
done
cat "$OUT/repro.log"
