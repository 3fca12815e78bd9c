#!/bin/bash
# v82: h200_a's "new" step hung in the section of 40 streams made and dropped without waiting.
# Each section alone, up to 8 processes each, stopping at the first that hangs: with the
# handle's pooled workspaces, and with a caller's workspace per call (no pool). A hang names
# each unfinished call and its workspace (the test's bounded wait).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
T='fa3_backward: streams made and dropped per call pass the handle*'
for sec in "no waiting between them*" "the same with a workspace of the caller's each*"; do
  for i in 1 2 3 4 5 6 7 8; do
    name=$( [[ $sec == no* ]] && echo pool || echo caller )_$i
    step $name 75 build/fa3_tests "$T" -c "$sec"
    grep -q "^rc=0" "$OUT/$name.log" || break
  done
done
