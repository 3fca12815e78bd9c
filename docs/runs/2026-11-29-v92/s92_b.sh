#!/bin/bash
# v92, call 2, on 47ea861c: the backward's [large] cases, the forward tests, the sanitizers on
# the backward's cases, fa3-sass over the library, the Python tests.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass
step large 170 build/fa3_tests '[gpu][backward][large]'
step sanitize 200 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step sass 60 build/fa3-sass --lib build/libfa3.so
step python 60 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step fwd_tests 200 build/fa3_tests '[gpu]~[backward]~[large]'
