#!/bin/bash
# session 49: the 8k-16k cells on an H100, fa3 and the public FA3 alone, 30 rounds
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for dtype in bf16 fp16; do
  FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout 280 python3 bench/compare.py --side-by-side --direction bwd \
    --dtype $dtype --seqlens 8192,16384 --systems fa3,fa3-public --public-fa3 .anchors/fa3 --rounds 30 \
    --csv $OUT/long_$dtype.csv > $OUT/long_$dtype.log 2>&1
  echo "== $dtype rc $? $(date +%T)"; grep -E "^\| d" $OUT/long_$dtype.log | tail -12; grep "this/public, all" $OUT/long_$dtype.log
done
