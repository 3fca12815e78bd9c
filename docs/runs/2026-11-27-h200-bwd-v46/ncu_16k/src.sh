#!/bin/bash
for spec in causal:1:build/libfa3.so:'fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_causal$' plain:0:.prev/libfa3_nd.so:'fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq$'; do
  IFS=: read name c lib rx <<< "$spec"
  echo "### $name"
  CAUSAL=$c FA3_LIBRARY=$PWD/$lib timeout 240 ncu --kernel-name regex:"$rx" --launch-count 1 --set none \
    --section SourceCounters --section WarpStateStats -o "$OUT/ncu_$name" -f python3 .prev/src.py 2>&1 | tail -2
  ncu -i "$OUT/ncu_$name.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/source_$name.csv.gz"
  ncu -i "$OUT/ncu_$name.ncu-rep" --page details 2>&1 | grep -i "stall\|cycles per" | head -30
  rm -f "$OUT/ncu_$name.ncu-rep"
done
ls -la $OUT
