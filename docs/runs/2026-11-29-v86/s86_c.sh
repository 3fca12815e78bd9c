#!/bin/bash
# v86: the shipped library (62a181d1) / its deterministic mode / the public FA3 / cuDNN in one
# process per dtype, the paper's grid 1k-16k, every head dim and mask, 8 rounds (each system
# in each place twice). Carry build/libfa3.so, .prev/libfa3_v83.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
ab_bwd sbs .prev/libfa3_v83.so 64,128,256 0,1 1024,2048,4096,8192,16384 8 fa3,fa3-det,fa3-public,cudnn
cd "$OUT" && cat gpu.txt sbs_*.log > logs.txt; cat sbs_*/*.md > tables.md; tar czf tables.tgz sbs_*
rm -rf gpu.txt sbs_*
