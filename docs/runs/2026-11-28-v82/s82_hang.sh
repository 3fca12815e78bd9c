#!/bin/bash
# v82: h200_a's "new" step hung in the section of 40 streams made and dropped without waiting.
# Each section alone (-c takes a section's exact name), up to 8 processes each, stopping at the
# first that hangs: with the handle's pooled workspaces, and with a caller's workspace per call
# (no pool). A hang names each unfinished call and its workspace (the test's bounded wait).
# Every log is appended to $OUT/hang.log (the device tool brings back a few files only).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
T="fa3_backward: streams made and dropped per call pass the handle's workspaces on"
for sec in "no waiting between them: a workspace is passed on only once its call has run" \
           "the same with a workspace of the caller's each (no pool)"; do
  for i in 1 2 3 4 5 6 7 8; do
    step run 75 build/fa3_tests "$T" -c "$sec"
    { echo "== $sec, run $i"; cat "$OUT/run.log"; } >> "$OUT/hang.log"
    grep -q "^rc=0" "$OUT/run.log" || break
  done
done
rm -f "$OUT/run.log"
