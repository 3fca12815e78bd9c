#!/bin/bash
# Run from the repository root (it was .gpu/check2.sh there; the cd below assumes that place).
cd "$(dirname "$0")/.."
find build -exec touch {} + 2>/dev/null
s=$SECONDS; timeout --signal=KILL 150 build/fa3-sass --lib build/libfa3.so > $OUT/sass.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/sass.log; tail -3 $OUT/sass.log
s=$SECONDS; timeout --signal=KILL 200 tools/run_python_tests.sh -q > $OUT/python.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/python.log; tail -3 $OUT/python.log
s=$SECONDS; OUT=$OUT timeout --signal=KILL 220 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests > $OUT/sanitize.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/sanitize.log; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|All tests|rc=" $OUT/sanitize.log | tail -8
