#!/bin/bash
# session 47, v47b (the d64 causal split taken out): backward GPU tests, fa3-sass, Python tests
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee $OUT/gpu.txt
( time timeout 330 build/fa3_tests '[gpu][backward]~[large]' ) > $OUT/tests.log 2>&1
grep -E "passed|failed" $OUT/tests.log; grep real $OUT/tests.log
timeout 120 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*' > $OUT/sass.log 2>&1; echo "sass rc $?"; tail -1 $OUT/sass.log
timeout 200 tools/run_python_tests.sh -p no:cacheprovider > $OUT/python.log 2>&1; tail -1 $OUT/python.log
