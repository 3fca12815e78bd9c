#!/bin/bash
# v87, call 3: this library (v87a's backward cubins) and its deterministic mode against the
# v84 cubins (.prev/libfa3_v87host.so: this session's host code, v84's kernels) and theirs, the
# public FA3 and cuDNN, one process per dtype, the paper's grid 1k-16k, every head dim and
# mask, 6 rounds (each of the 6 systems first once). Carry build/libfa3.so,
# .prev/libfa3_v87host.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so .prev/libfa3_v87host.so
ab_bwd sbs .prev/libfa3_v87host.so 64,128,256 0,1 1024,2048,4096,8192,16384 6 \
  fa3,fa3-det,fa3-prev,fa3-prev-det,fa3-public,cudnn
cd "$OUT" && cat gpu.txt sbs_*.log > logs.txt; cat sbs_*/*.md > tables.md; tar czf tables.tgz sbs_*
rm -rf gpu.txt sbs_*
