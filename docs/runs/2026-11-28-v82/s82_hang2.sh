#!/bin/bash
# v82: h200_a's sequence again (the threads test, then every section of the churn test, in one
# process), up to 12 processes, stopping at the first that fails or hangs; each section alone
# did not hang in 8 + 8 processes (h200_hang1); h200_hang2 hung in its first. Since then the
# caller-workspace section runs before the pooled one (a hang there is the kernels', not the
# pool's), and a hang lists every call's workspace. One log, $OUT/hang.log.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
NEW_TESTS='fa3_backward: streams made and dropped per call pass the handle*,fa3_backward: threads and streams at once*'
for i in $(seq 1 6); do
  step run 80 build/fa3_tests --durations yes "$NEW_TESTS"
  { echo "== run $i"; cat "$OUT/run.log"; } >> "$OUT/hang.log"
  grep -q "^rc=0" "$OUT/run.log" || break
done
rm -f "$OUT/run.log"
