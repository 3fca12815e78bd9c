#!/bin/bash
# session 48: HEAD on an H100: backward tests, then the side by side (fa3, fa3-det, public, cuDNN; 8 rounds)
set -u
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
echo "== tests $(date +%T)"
timeout 300 build/fa3_tests '[gpu][backward]~[large]' 2>&1 | tee $OUT/tests.log | tail -2
echo "== side by side $(date +%T)"
for dtype in bf16 fp16; do
  FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout 140 python3 bench/compare.py --side-by-side --direction bwd \
    --dtype $dtype --public-fa3 .anchors/fa3 --systems fa3,fa3-det,fa3-public,cudnn --rounds 8 \
    --csv $OUT/sbs_$dtype.csv > $OUT/sbs_$dtype.log 2>&1
  echo "== $dtype rc $? $(date +%T)"; grep -E "^- (this/public|fa3/cuDNN|det/default), from 2k" $OUT/sbs_$dtype.log
done
