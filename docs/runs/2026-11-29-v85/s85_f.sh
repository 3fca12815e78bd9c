#!/bin/bash
# v85: the shipped library's tests binary with the hang report's new probe (ordinary launches):
# the churn tests (threads test first) 3 times; then the test's own GPU check of the probe is
# only on a hang, so this shows the tests still pass, not the probe.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
SEQ='fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
churn sequence 3 build/fa3_tests -w NoTests "$SEQ"
cd "$OUT" && cat gpu.txt churn.log > logs.txt; rm -f gpu.txt churn.log run.log; cat logs.txt
