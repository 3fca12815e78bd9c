#!/bin/bash
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout 200 python3 bench/compare.py --side-by-side --direction bwd \
  --dtype bf16,fp16 --hdims 64 --causal 1 --seqlens 8192,12288,16384 --systems fa3,fa3-det,fa3-prev,fa3-public \
  --prev-lib $PWD/.prev/libfa3_base.so --public-fa3 .anchors/fa3 --rounds 5 --csv $OUT/sbs.csv > $OUT/sbs.log 2>&1
echo rc $?; grep -E "^(bf16|fp16) seqlen" $OUT/sbs.log
echo "== tests $(date +%T)"
timeout 300 build/fa3_tests '[gpu][backward]~[large]' 2>&1 | tee $OUT/tests.log | tail -3
