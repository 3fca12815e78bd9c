#!/bin/bash
# v91, call 3: the lab's other persistent non-causal kernels (_dqt_pt, which splits its last
# wave; _dqq_rw_pt, which no longer finds split regions at head dim 64 and takes its tiles
# whole) by name in the _pt walk test, from a lab build of only those four kernels besides the
# production set (build/labmini); then the side by side of this build (fa3, its deterministic
# mode), v90's shipped library (fa3-prev), the public FA3 and cuDNN, the paper's grid from 1k,
# 6 rounds, one process per dtype.
# Carry build/libfa3.so, build/labmini/fa3_tests, .prev/libfa3_v90.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/labmini/fa3_tests .prev/libfa3_v90.so
step lab_pt_walk 200 build/labmini/fa3_tests -s 'the persistent (_pt) kernels walk several tiles a CTA'
grep -c 'dqt_pt\|dqq_rw_pt' "$OUT/lab_pt_walk.log"
ab_bwd sbs "$PWD/.prev/libfa3_v90.so" 64,128,256 0,1 1024,2048,4096,8192,16384 6 \
  fa3,fa3-det,fa3-prev,fa3-public,cudnn
gzip -9 "$OUT/lab_pt_walk.log"
cd "$OUT" && cat gpu.txt sbs_*.log > logs.txt; cat sbs_*/*.md > tables.md
tar czf tables.tgz sbs_*; rm -rf sbs_*
