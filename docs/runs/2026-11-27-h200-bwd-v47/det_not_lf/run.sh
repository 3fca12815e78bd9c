#!/bin/bash
# session 47, call 1: the not_lf build (build/) — backward GPU tests, then det A/B d64 causal vs v46f
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee $OUT/gpu.txt
( time timeout 300 build/fa3_tests '[gpu][backward]~[large]' ) > $OUT/tests.log 2>&1
tail -4 $OUT/tests.log
for dt in bf16 fp16; do
  FA3_LIBRARY=$PWD/.prev/libfa3_notlf.so PYTHONUNBUFFERED=1 timeout 170 python3 bench/compare.py \
    --side-by-side --direction bwd --dtype $dt --hdims 64 --causal 1 --seqlens 1024,2048,4096,8192 \
    --systems fa3,fa3-det,fa3-prev,fa3-prev-det,fa3-public --prev-lib $PWD/.prev/libfa3_v46f.so \
    --public-fa3 .anchors/fa3 --rounds 5 --csv $OUT/ab_$dt.csv > $OUT/ab_$dt.log 2>&1
  echo "== $dt rc $?"; grep -E "^\s*(64|d64)|ratio|this/prev|det" $OUT/ab_$dt.log | tail -20
done
( time SANITIZE_FILTER="small backward cases for compute-sanitizer" timeout 330 tools/sanitize.sh build/fa3_tests ) > $OUT/sanitize.log 2>&1
grep -E "===|ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|real" $OUT/sanitize.log
