#!/bin/bash
# session 63, v63b: the same library and code on different data: at the power cap (data63.py,
# CUDA events) and at ncu's locked clock (cycles). Carry: .anchors .gpu/v63
cd "$(dirname "$0")/../../.."
L=.gpu/v63
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
FA3_LIBRARY=$PWD/$L/libfa3_ctl.so timeout 300 python3 docs/runs/2026-11-28-bwd-v63/data63.py 2>&1 | tee "$OUT/data63.log"
for a in 1 0.05 4; do
  FA3_LIBRARY=$PWD/$L/libfa3_ctl.so timeout 120 ncu --metrics $M --csv -k regex:"dqq_pt_causal" \
    --launch-skip 1 --launch-count 1 python3 docs/runs/2026-11-28-bwd-v63/ncu63.py 64 1 8192 $a > $OUT/ncu_data_$a.csv 2>/dev/null
  printf 'ncu d64 causal 8k, Q x %-5s ' $a
  grep -E 'time_duration|cycles_elapsed|pct_of_peak' $OUT/ncu_data_$a.csv | awk -F'","' '{printf "%s %s  ", $(NF-2), $NF}'; echo
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
