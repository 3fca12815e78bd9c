#!/bin/bash
# v92, call 1. This build (47ea861c: every _rw kernel's rotated-walk start without a 64-bit
# division, so the d64 _dqq_rw_fs and d256 _kvt_dqh_rw_fs cubins changed; the split regions
# follow the compiled kernels, backward_key_splits) first runs the _pt walk test and every
# backward GPU test but [large]; then this / v91 (.prev/libfa3_v91.so) at d64 and d256
# non-causal (the changed cubins), 12 rounds; then the split threshold's edge: a library that
# splits tiles from 14 steps (.prev/libfa3_thr14.so) / one that never splits
# (.prev/libfa3_thr1073741824.so) at d128 non-causal, 14-26 steps a tile (seqlen 1120-2048).
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v91.so, .prev/libfa3_thr14.so,
# .prev/libfa3_thr1073741824.so (not .anchors: no public FA3 here).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v91.so .prev/libfa3_thr14.so \
  .prev/libfa3_thr1073741824.so
pt_walk_first || { cat "$OUT/pt_walk.log" | tail -20; exit 1; }
step bwd_tests 260 build/fa3_tests '[gpu][backward]~[large]'
ab_bwd rw "$PWD/.prev/libfa3_v91.so" 64,256 0 1024,4096,16384 12 fa3,fa3-prev
AB_LIB=$PWD/.prev/libfa3_thr14.so ab_bwd thr "$PWD/.prev/libfa3_thr1073741824.so" 128 0 \
  1120,1200,1280,1600,1760,1920,2048 12 fa3,fa3-prev
cd "$OUT" && cat gpu.txt rw_*.log thr_*.log > logs.txt; cat rw_*/*.md thr_*/*.md > tables.md
tar czf tables.tgz rw_* thr_*; rm -rf rw_* thr_*
