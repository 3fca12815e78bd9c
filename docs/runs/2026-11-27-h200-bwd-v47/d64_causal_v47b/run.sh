#!/bin/bash
# session 47, v47b: d64 causal side by side (fa3, fa3-det, public, cuDNN), 10 rounds, both dtypes
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for dt in bf16 fp16; do
  FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout 200 python3 bench/compare.py --side-by-side \
    --direction bwd --dtype $dt --hdims 64 --causal 1 --seqlens 1024,2048,4096,8192,16384 \
    --systems fa3,fa3-det,fa3-public,cudnn --public-fa3 .anchors/fa3 --rounds 10 --csv $OUT/d64c_$dt.csv > $OUT/d64c_$dt.log 2>&1
  echo "== $dt rc $?"; grep -E "^\| d64 causal \| [0-9]+/" $OUT/d64c_$dt.log
done
