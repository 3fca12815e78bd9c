#!/bin/bash
# v89, call 1: v88's final library (d8bb967e, host edits after v88's device time) on the GPU:
# the _pt walk, every backward and forward GPU test but [large], Python with FA3_REQUIRE_GPU=1.
# Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
pt_walk_first || exit 1
step bwd_tests 260 build/fa3_tests '[gpu][backward]~[large]'
step python 60 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step fwd_tests 200 build/fa3_tests '[gpu]~[backward]~[large]'
