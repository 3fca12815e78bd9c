#!/bin/bash
# v88, call 1: this session's library (v84's 64 cubins byte for byte; host code: the workspace
# record after a throwing launch, the C boundary's handlers, the leak fixes) and tests binary
# (backward inputs read back, caller workspaces on half the shapes): the _pt walk first, the
# backward's GPU tests but [large], Python with FA3_REQUIRE_GPU=1, fa3-sass (the new float
# RED/ATOM rule on the real kernels), fa3-bench's checked backward and forward+backward rows.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-bench, build/fa3-sass.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-bench build/fa3-sass
pt_walk_first || exit 1
step bwd_tests 300 build/fa3_tests '[gpu][backward]~[large]' --durations yes
step python 90 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step sass 120 build/fa3-sass --lib build/libfa3.so
step bench_bwd 150 build/fa3-bench --direction bwd --dtype bf16,fp16 --seqlen 1k,2k --check
step bench_fwdbwd 100 build/fa3-bench --direction fwdbwd --dtype bf16,fp16 --seqlen 1k --check
