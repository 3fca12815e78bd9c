#!/bin/bash
# session 47: ncu source counters of _dqq_pt_causal at 8k, v47b (with v46f) against v46d's (without)
nvidia-smi --query-gpu=name --format=csv,noheader
for spec in v47b:build/libfa3.so v46d:.prev/libfa3_base.so; do
  IFS=: read name lib <<< "$spec"
  echo "### $name"
  S=8192 FA3_LIBRARY=$PWD/$lib timeout 200 ncu --kernel-name regex:'fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_pt_causal$' --launch-count 1 --set none \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight -o "$OUT/ncu_$name" -f python3 .prev/src8.py 2>&1 | tail -2
  ncu -i "$OUT/ncu_$name.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/source_$name.csv.gz"
  ncu -i "$OUT/ncu_$name.ncu-rep" --page details 2>&1 | grep -i "duration\|stall\|cycles per" | head -30
  rm -f "$OUT/ncu_$name.ncu-rep"
done
