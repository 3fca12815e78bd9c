#!/bin/bash
# session 50: the shipped library (1c2f71c) checked again: backward GPU tests, sanitizers,
# [gpu][large], fa3-sass, Python tests
cd "$(dirname "$0")/.."
find build -exec touch {} + 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$SECONDS; timeout --signal=KILL 230 build/fa3_tests '[gpu][backward]~[large]' > $OUT/tests.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/tests.log; tail -3 $OUT/tests.log
s=$SECONDS; timeout --signal=KILL 200 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests > $OUT/sanitize.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/sanitize.log; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|All tests|rc=" $OUT/sanitize.log | tail -8
s=$SECONDS; timeout --signal=KILL 80 build/fa3_tests '[gpu][large]' > $OUT/large.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/large.log; tail -3 $OUT/large.log
s=$SECONDS; timeout --signal=KILL 60 build/fa3-sass --lib build/libfa3.so > $OUT/sass.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/sass.log; tail -3 $OUT/sass.log
s=$SECONDS; timeout --signal=KILL 40 tools/run_python_tests.sh -q > $OUT/python.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/python.log; tail -3 $OUT/python.log
