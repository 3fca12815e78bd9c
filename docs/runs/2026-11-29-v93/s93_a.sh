#!/bin/bash
# v93, call 1 (run as one command line; kept here as the record): the GPU checks of libfa3.so
# 62a96ac5 (v92's review refactor, host code only): the _pt walk, the backward suite, [large].
# Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
pt_walk_first || { tail -20 "$OUT/pt_walk.log"; exit 1; }
step bwd_tests 260 build/fa3_tests '[gpu][backward]~[large]'
step large 170 build/fa3_tests '[gpu][backward][large]'
