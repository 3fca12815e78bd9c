#!/bin/bash
# v87, call 1: the backward cubins with the ordered adds' proxy fence (v87a) on the GPU first:
# the _pt walk test, every backward GPU test but [large], the Python tests. Carry
# build/libfa3.so, build/fa3_tests, .prev/libfa3_v87host.so.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v87host.so
pt_walk_first || exit 1
step bwd_tests 320 build/fa3_tests '[gpu][backward]~[large]'
step python 120 tools/run_python_tests.sh -q
