#!/bin/bash
# v87, call 5: the final library (v84's 64 cubins byte for byte; this session's host code with
# the relaxed capture mode and the 2^31 - 256 bound) and its tests binary: the new capture
# test first, then every backward GPU test but [large], Python, the forward's GPU tests.
# Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
step capture 60 build/fa3_tests '*global-mode capture on another thread*'
step bwd_tests 300 build/fa3_tests '[gpu][backward]~[large]'
step python 60 tools/run_python_tests.sh -q
step fwd_tests 200 build/fa3_tests '[gpu]~[backward]~[large]'
