#!/bin/bash
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== tests $(date +%T)"
timeout 330 build/fa3_tests '[gpu][backward]~[large]' 2>&1 | tee $OUT/tests.log | tail -3
echo "== sass $(date +%T)"
timeout 60 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*' > $OUT/sass.log 2>&1; echo rc $?; tail -1 $OUT/sass.log
echo "== ab $(date +%T)"
FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout 200 python3 bench/compare.py --side-by-side --direction bwd \
  --dtype bf16,fp16 --hdims 64 --causal 1 --seqlens 1024,2048,4096,8192 --systems fa3,fa3-det,fa3-prev,fa3-public \
  --prev-lib $PWD/.prev/libfa3_base.so --public-fa3 .anchors/fa3 --rounds 6 --csv $OUT/ab.csv > $OUT/ab.log 2>&1
echo rc $?; grep -E "^(bf16|fp16) seqlen" $OUT/ab.log
