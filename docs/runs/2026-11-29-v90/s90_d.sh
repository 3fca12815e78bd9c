#!/bin/bash
# v90, call 4: the probe library (.prev/libfa3_v90pt.so: d128 causal on _dqh_fs_pt_causal at
# every length) against this build at d128 causal 8k-16k, 16 rounds; then the side by side of
# this build (fa3, its deterministic mode), v84's cubins (fa3-prev), the public FA3 and cuDNN,
# the paper's grid from 1k, 6 rounds, one process per dtype.
# Carry build/libfa3.so, .prev/libfa3_v87host.so, .prev/libfa3_v90pt.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so .prev/libfa3_v87host.so .prev/libfa3_v90pt.so
(export AB_LIB=$PWD/.prev/libfa3_v90pt.so; ab_bwd pt16 "$PWD/build/libfa3.so" 128 1 8192,16384 16 fa3,fa3-prev)
ab_bwd sbs .prev/libfa3_v87host.so 64,128,256 0,1 1024,2048,4096,8192,16384 6 \
  fa3,fa3-det,fa3-prev,fa3-public,cudnn
cd "$OUT" && cat gpu.txt pt16_*.log sbs_*.log > logs.txt; cat pt16_*/*.md sbs_*/*.md > tables.md
tar czf tables.tgz pt16_* sbs_*; rm -rf pt16_* sbs_*
