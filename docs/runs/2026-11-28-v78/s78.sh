#!/usr/bin/env bash
# v78: the host-path and test changes of this session on the GPU (no kernel changed: all 64
# cubins are the bytes of v77's library). The new backward tests first (a hang shows fast),
# then every [gpu] test but [large], the [large] ones, and the Python suite.
set -u
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
# (Catch2 v2: one argument, the names separated by commas.)
step new_tests 150 build/fa3_tests 'the checks fail on tampered gradients (negative controls),fa3_backward refuses bad arguments on real memory and leaves every output as it was,CUDA graphs: the backward without a workspace and a first tile counter are refused during capture; captured calls replay bit for bit'
step tests 420 build/fa3_tests '[gpu]~[large]'
step large 110 build/fa3_tests '[gpu][large]'
step python 90 tools/run_python_tests.sh -q
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.log gpu.txt)
