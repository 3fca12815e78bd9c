#!/bin/bash
# v82: the hang is the kernels' (h200_hang3: with a caller's workspace per call, calls 1-39 of
# 40 never finished). The same sequence with two diagnostic builds of fa3_tests (backward_
# launch.cpp with -DFA3_DIAG_POST_LATE: the postprocess waits for the main grid, no early
# start; -DFA3_DIAG_NO_PDL: three ordinary launches), up to 5 processes each, stopping at the
# first that hangs. One log, $OUT/hang.log.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/diag/*/fa3_tests
NEW_TESTS='fa3_backward: streams made and dropped per call pass the handle*,fa3_backward: threads and streams at once*'
for v in POST_LATE NO_PDL; do
  for i in 1 2 3 4 5; do
    step run 80 build/diag/$v/fa3_tests --durations yes "$NEW_TESTS"
    { echo "== $v run $i"; cat "$OUT/run.log"; } >> "$OUT/hang.log"
    grep -q "^rc=0" "$OUT/run.log" || break
  done
done
rm -f "$OUT/run.log"
