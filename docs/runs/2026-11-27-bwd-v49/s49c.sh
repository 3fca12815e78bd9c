#!/bin/bash
# (run as .prev/s49c.sh: the cd below takes the repository root from there; .prev/libfa3_head.so is HEAD 839d80f's library, .prev/libfa3_v49.so this build's)
# session 49: the v49 library (default small d64 causal calls from 6 query blocks in the
# last-first order): backward GPU tests, sanitizers, Python tests, A/B against HEAD's library
cd "$(dirname "$0")/.."
find build -exec touch {} + 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$SECONDS; timeout --signal=KILL 240 build/fa3_tests '[gpu][backward]~[large]' > $OUT/tests.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/tests.log; tail -3 $OUT/tests.log
s=$SECONDS; timeout --signal=KILL 60 tools/run_python_tests.sh -q > $OUT/python.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/python.log; sed -n 2,6p $OUT/python.log | tr -cd '.sFE' | awk '{print "python: " length($0) " tests run; dots/s/F/E:"}'; sed -n 2,6p $OUT/python.log | tr -cd 'sFE' ; echo
export ROUNDS=${ROUNDS:-8} TMO=150
RUNS="ab_bf16:v49:head:bf16:64:1:512,640,768,1024,2048 ab_fp16:v49:head:fp16:64:1:512,640,768,1024,2048" bash .prev/k_ab.sh
if [ "${SANITIZE:-1}" = 1 ]; then
s=$SECONDS; timeout --signal=KILL 200 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests > $OUT/sanitize.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/sanitize.log; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" $OUT/sanitize.log
fi
