#!/bin/bash
# session 47, final checks on the shipped build (commit 823933a's library): fa3-sass on the
# backward kernels, the Python tests, the 10-round backward side by side (fa3, fa3-det, public, cuDNN)
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 120 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*' > $OUT/sass.log 2>&1; echo "sass rc $?"; tail -3 $OUT/sass.log
( time timeout 200 tools/run_python_tests.sh -p no:cacheprovider ) > $OUT/python.log 2>&1; tail -4 $OUT/python.log
SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 10" tools/gpu-check.sh side-by-side-bwd > $OUT/sbs.log 2>&1
grep -E "geometric|min" $OUT/sbs.log | head -30
