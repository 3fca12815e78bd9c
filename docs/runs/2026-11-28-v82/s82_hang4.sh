#!/bin/bash
# v82: after h200_hang3b (POST_LATE hung in its first process, NO_PDL passed 5 of 5): which of
# the two programmatic launches it takes. The same sequence with two diagnostic builds of
# fa3_tests (backward_launch.cpp with -DFA3_DIAG_PDL_MAIN_ONLY: the main kernel by programmatic
# launch, the postprocess ordinary; -DFA3_DIAG_PDL_POST_ONLY: the reverse), up to 5 processes each,
# stopping at the first that hangs. One log, $OUT/hang.log.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/diag/*/fa3_tests
NEW_TESTS='fa3_backward: streams made and dropped per call pass the handle*,fa3_backward: threads and streams at once*'
for v in PDL_MAIN_ONLY PDL_POST_ONLY; do
  for i in 1 2 3 4 5; do
    step run 80 build/diag/$v/fa3_tests --durations yes "$NEW_TESTS"
    { echo "== $v run $i"; cat "$OUT/run.log"; } >> "$OUT/hang.log"
    grep -q "^rc=0" "$OUT/run.log" || break
  done
done
rm -f "$OUT/run.log"
