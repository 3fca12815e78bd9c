#!/bin/bash
# v92, call 4 (run as one command line; kept here as the record), on c2cf5a56: the backward's
# [large] cases, the Python tests and fa3-sass over the library.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass
step large 170 build/fa3_tests '[gpu][backward][large]'
step python 60 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step sass 60 build/fa3-sass --lib build/libfa3.so
