#!/bin/bash
# v82c: the final library (ordinary backward launches): the Python suite, and the hanging
# sequence in 10 more processes (h200_b: 10 of 10 passed).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
step python 120 tools/run_python_tests.sh -q
NEW_TESTS='fa3_backward: streams made and dropped per call pass the handle*,fa3_backward: threads and streams at once*'
for i in $(seq 1 10); do
  step run 80 build/fa3_tests --durations yes "$NEW_TESTS"
  { echo "== run $i"; cat "$OUT/run.log"; } >> "$OUT/churn.log"
  grep -q "^rc=0" "$OUT/run.log" || break
done
rm -f "$OUT/run.log"
