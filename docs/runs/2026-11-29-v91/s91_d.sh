#!/bin/bash
# v91, call 4: the split's threshold (no split below kSplitMinTileSteps = 16 steps a tile: the
# paper grid's d128 1k tiles, 13 steps, go whole again), host code only. First this build /
# the build before (.prev/libfa3_v91.so, 6265d888) at d128 non-causal 1k (changed) and 2k
# (control), 12 rounds; then every backward GPU test but [large] and the sanitizers' backward
# cases (a sanitize shape changed so that it still splits).
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v91.so.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v91.so
ab_bwd thr "$PWD/.prev/libfa3_v91.so" 128 0 1024,2048 12 fa3,fa3-prev
step bwd_tests 240 build/fa3_tests '[gpu][backward]~[large]'
step sanitize 200 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
cd "$OUT" && cat gpu.txt thr_*.log > logs.txt; cat thr_*/*.md > tables.md
tar czf tables.tgz thr_*; rm -rf thr_*
