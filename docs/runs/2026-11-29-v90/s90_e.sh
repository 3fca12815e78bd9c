#!/bin/bash
# v90, call 5: the rotated walk's start without a division routine in the split kernels (the
# lab's _dqq_rw_pt spilled in fp32's IEEE slow path): every backward GPU test but [large],
# the [large] ones, fa3-sass and Python on this build.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass
step bwd_tests 270 build/fa3_tests '[gpu][backward]~[large]'
step python 40 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step sass 60 build/fa3-sass --lib build/libfa3.so
step bwd_large 110 build/fa3_tests '[gpu][backward][large]'
