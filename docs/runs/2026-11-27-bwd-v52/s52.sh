#!/bin/bash
# session 52: the shipped library (1c2f71c's) on an H200: the backward side by side (fa3,
# fa3-det, public FA3, cuDNN; 10 rounds), then [gpu][large], the whole fa3-sass and Python.
cd "$(dirname "$0")/../../.."
find build -exec touch {} + 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 10" \
  timeout --signal=KILL 520 tools/gpu-check.sh side-by-side-bwd 2>&1 | tail -4
s=$SECONDS; timeout --signal=KILL 80 build/fa3_tests '[gpu][large]' > $OUT/large.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/large.log; tail -3 $OUT/large.log
s=$SECONDS; timeout --signal=KILL 40 build/fa3-sass --lib build/libfa3.so > $OUT/sass.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/sass.log; tail -2 $OUT/sass.log
s=$SECONDS; timeout --signal=KILL 50 tools/run_python_tests.sh -q > $OUT/python.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/python.log; tail -2 $OUT/python.log
