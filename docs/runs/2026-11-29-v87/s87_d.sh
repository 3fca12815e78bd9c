#!/bin/bash
# v87, call 4: the final library (v84's 64 cubins, byte for byte, and this session's host code)
# and its tests binary: every backward GPU test but [large], the Python tests, fa3-bench's
# checked backward rows. Carry build/libfa3.so, build/fa3_tests, build/fa3-bench.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-bench
pt_walk_first || exit 1
step bwd_tests 320 build/fa3_tests '[gpu][backward]~[large]'
step python 120 tools/run_python_tests.sh -q
step bench_bwd 120 build/fa3-bench --direction bwd --hdim 64,128,256 --seqlen 1k --causal 0,1 \
  --deterministic --check
