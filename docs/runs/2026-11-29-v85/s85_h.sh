#!/bin/bash
# v85: every [gpu] test but the [large] ones, on the shipped library (62a181d1) with this
# session's tests binary (e266989d). Carry build/fa3_tests, build/libfa3.so.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
step gpu 420 build/fa3_tests --durations yes -w NoTests '[gpu]~[large]'
cd "$OUT" && cat gpu.txt gpu.log > logs.txt; rm -f gpu.txt gpu.log
