#!/bin/bash
# v85: lab/pdl_repro (build/pdl_repro, built as its header says, with the trigger arguments) at
# 132 main CTAs (a CTA an SM, as the _pt picks), where s85_d hung: what it needs, and which
# triggers avoid it. Each form bounded (a round 20 s, the process 30 s); $OUT/repro.log.
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/repro.log"
export PDL_REPRO_WAIT_S=20
for args in "both 40 10 132 9 2 1 1" "both 40 10 132 9 2 1 1" "both 40 10 132 0 0 1 1" \
            "both 40 10 132 9 0 1 1" "main 40 10 132 9 2 1 1" "post 40 10 132 9 2 1 1" \
            "both 40 10 132 9 2 0 1" "both 40 10 132 9 2 1 2" "both 40 10 132 9 2 1 0" \
            "none 40 10 132 9 2"; do
  s=$SECONDS
  timeout --signal=KILL 30 build/pdl_repro $args >> "$OUT/repro.log" 2>&1
  echo "rc=$? $((SECONDS - s)) s ($args)" >> "$OUT/repro.log"
done
cat "$OUT/repro.log"
