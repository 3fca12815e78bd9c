#!/bin/bash
# A/B of the dQ counter poll variants (deterministic mode) against the v40 library.
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
for m in m1 m2; do
  for dt in bf16; do
    FA3_LIBRARY=$PWD/.prev/libfa3_$m.so PYTHONUNBUFFERED=1 timeout 280 python3 bench/compare.py \
      --side-by-side --direction bwd --dtype $dt --hdims 128,64 --causal 1,0 \
      --seqlens 2048,4096,8192,16384 --systems fa3,fa3-prev,fa3-det,fa3-prev-det \
      --prev-lib $PWD/.prev/libfa3_v40.so --rounds 4 --csv $OUT/poll_${m}_$dt.csv \
      > $OUT/poll_${m}_$dt.log 2>&1
    echo "== $m $dt rc $?"
    python3 - "$OUT/poll_${m}_$dt.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(f"d{r['head_dim']} c{r['causal']} S{r['seqlen']:>5} default this/prev {r.get('this_over_prev','')} "
          f"det this/prev {r.get('det_over_prev_det','')} det/default {r.get('fa3_det_over_fa3','')} "
          f"status {r['fa3_status']} {r['fa3_det_status']}")
PY
  done
done
