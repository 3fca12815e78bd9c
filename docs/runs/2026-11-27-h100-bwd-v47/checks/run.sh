#!/bin/bash
# session 47, H100: backward GPU tests on the shipped build, then d64 causal this (v47a) / v46d's library
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee $OUT/gpu.txt
( time timeout 330 build/fa3_tests '[gpu][backward]~[large]' ) > $OUT/tests.log 2>&1
grep -E "passed|failed" $OUT/tests.log; grep real $OUT/tests.log
for dt in bf16 fp16; do
  FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout 100 python3 bench/compare.py \
    --side-by-side --direction bwd --dtype $dt --hdims 64 --causal 1 --seqlens 1024,2048,4096,8192,16384 \
    --systems fa3,fa3-det,fa3-prev,fa3-prev-det,fa3-public --prev-lib $PWD/.prev/libfa3_base.so \
    --public-fa3 .anchors/fa3 --rounds 4 --csv $OUT/ab_$dt.csv > $OUT/ab_$dt.log 2>&1
  echo "== $dt rc $?"; grep -E "^\| d64 causal \| [0-9]" $OUT/ab_$dt.log | head -1
done
