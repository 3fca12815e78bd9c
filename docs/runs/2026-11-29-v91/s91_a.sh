#!/bin/bash
# v91, call 1: this build (d128 causal on _dqh_fs_pt_causal at every length; the split sum's
# tile-layer helpers and the piece's tile in BwdWork; split regions at head dim 128 only)
# through every backward GPU test, [large], fa3-sass and Python; then an A/B against v90's
# shipped library (.prev/libfa3_v90.so, 4b099e4c) at d128, both masks, 1k-16k, 8 rounds.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass, .prev/libfa3_v90.so.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass .prev/libfa3_v90.so
step bwd_tests 280 build/fa3_tests '[gpu][backward]~[large]'
step bwd_large 160 build/fa3_tests '[gpu][backward][large]'
step sass 70 build/fa3-sass --lib build/libfa3.so
step python 45 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
ab_bwd ab128 "$PWD/.prev/libfa3_v90.so" 128 0,1 1024,2048,4096,8192,16384 8 fa3,fa3-prev
cd "$OUT" && cat gpu.txt ab128_*.log > logs.txt; cat ab128_*/*.md > tables.md
tar czf tables.tgz ab128_*; rm -rf ab128_*
