#!/bin/bash
# v93, call 5: the forward's GPU tests on 62a96ac5 (its host code unchanged since c2cf5a56,
# where they passed; run for the record of these bytes). Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
step fwd_tests 230 build/fa3_tests '[gpu]~[backward]~[large]'
