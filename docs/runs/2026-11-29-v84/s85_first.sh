#!/bin/bash
# For the session after v84 (written without device time left; not yet run). Build first:
# `make -j2 && docs/runs/2026-11-28-v83/build_pdl_diag.sh`; carry build/fa3_tests,
# build/libfa3.so, build/diag/PDL/fa3_tests.
# Where programmatic launches hang (v84 h200_1: the full churn sequence hung in a handle's-pool
# section; the deterministic test's pool section alone passed 5 of 5). Each probe runs up to
# 5 processes with build/diag/PDL and stops at its first failure or hang (100 s), whose whole
# log is kept (Catch2 names the section of a failed assertion):
#   1. the two non-deterministic churn tests alone (1000 rows: one-tile _dqh, no waits
#      between main-kernel CTAs; 1200 rows: the persistent pick, first-store tickets). The
#      pattern ends in a wildcard before the names' commas: a comma splits Catch2's test spec
#      (v84's filter with the whole name ran nothing);
#   2. the deterministic churn test alone, every section;
#   3. the full sequence (the threads test first).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/diag/PDL/fa3_tests
probe() {  # probe NAME PATTERN
  if churn "$1" 5 build/diag/PDL/fa3_tests --durations yes "$2"; then
    rm -f "$OUT/run.log"
  else
    mv "$OUT/run.log" "$OUT/failed_$1.log"
  fi
}
probe nondet 'fa3_backward: streams per call*'
probe det 'fa3_backward: streams made and dropped per call*'
probe sequence 'fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
cd "$OUT" && cat gpu.txt churn.log failed_*.log > logs.txt 2>/dev/null; rm -f gpu.txt churn.log failed_*.log
