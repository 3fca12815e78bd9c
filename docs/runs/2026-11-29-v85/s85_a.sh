#!/bin/bash
# v85, one device call: where programmatic launches hang. Build first (from the repository root):
#   make && make DEBUG=1 build-debug/fa3_tests build-debug/libfa3.a
#   B=build docs/runs/2026-11-29-v85/build_pdl_diag.sh; B=build-debug docs/runs/2026-11-29-v85/build_pdl_diag.sh
#   strip build/diag/PDL/fa3_tests build-debug/diag/PDL/fa3_tests
# and carry those two fa3_tests.
# 1. debug: the churn sequence (threads test first) with programmatic launches and the debug
#    kernels, whose mbarrier and counter waits trap after ~2^34 cycles (~10 s) with the block,
#    the thread and the barrier or counter: a trap names the wait that never ends; a hang past
#    the tests' own 60 s bound without a trap puts it outside those waits (griddepcontrol.wait,
#    a named barrier, or before the kernels run).
# 2. nondet / det: v84's s85_first.sh probes with the release kernels.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum build/diag/PDL/fa3_tests build-debug/diag/PDL/fa3_tests | tee -a "$OUT/gpu.txt"
SEQ='fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
probe() {  # probe NAME RUNS BINARY PATTERN
  if churn "$1" "$2" "$3" --durations yes "$4"; then
    rm -f "$OUT/run.log"
  else
    mv "$OUT/run.log" "$OUT/failed_$1.log"
  fi
}
probe debug 3 build-debug/diag/PDL/fa3_tests "$SEQ"
probe nondet 3 build/diag/PDL/fa3_tests 'fa3_backward: streams per call*'
probe det 3 build/diag/PDL/fa3_tests 'fa3_backward: streams made and dropped per call*'
cd "$OUT" && for f in failed_*.log; do [ -f "$f" ] && gzip -k "$f"; done
cat gpu.txt churn.log > logs.txt 2>/dev/null; rm -f gpu.txt churn.log
ls -la
