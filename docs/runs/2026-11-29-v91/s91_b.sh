#!/bin/bash
# v91, call 2: this build's forward GPU tests and the three sanitizers on the backward's
# sanitize cases; then the side by side of this build (fa3, its deterministic mode), v90's
# shipped library (fa3-prev), the public FA3 and cuDNN, the paper's grid from 1k, 4 rounds,
# one process per dtype.
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v90.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v90.so
step sanitize 250 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step fwd_tests 220 build/fa3_tests '[gpu]~[backward]~[large]'
ab_bwd sbs "$PWD/.prev/libfa3_v90.so" 64,128,256 0,1 1024,2048,4096,8192,16384 4 \
  fa3,fa3-det,fa3-prev,fa3-public,cudnn
cd "$OUT" && cat gpu.txt sbs_*.log > logs.txt; cat sbs_*/*.md > tables.md
tar czf tables.tgz sbs_*; rm -rf sbs_*
