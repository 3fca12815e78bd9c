#!/bin/bash
# v93, calls 6 and 7: the committed fa3_tests (call 6: the new case's heading comment after
# call 3; call 7: after the review's Case::problem()) on the
# sanitizers' backward cases, plain and under memcheck. Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
step plain 60 build/fa3_tests '[backward][sanitize]'
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 99 build/fa3_tests '[backward][sanitize]'
