#!/bin/bash
# v93, call 2: the backward sanitizers, fa3-sass and Python on 62a96ac5; then v93a, the split's
# chunk rule with fewer, longer chunks (host-only probes: a chunk of at least 2/3 of a tile,
# .prev/libfa3_p23.so, and 3/4, .prev/libfa3_p34.so) against this build, d128 non-causal 2k-16k.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass, .prev/libfa3_p23.so, .prev/libfa3_p34.so.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass .prev/libfa3_p23.so .prev/libfa3_p34.so
step sanitize 200 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step sass 60 build/fa3-sass --lib build/libfa3.so
step python 60 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
AB_LIB=$PWD/.prev/libfa3_p23.so ab_bwd p23 "$PWD/build/libfa3.so" 128 0 2048,4096,8192,16384 12 fa3,fa3-prev
AB_LIB=$PWD/.prev/libfa3_p34.so ab_bwd p34 "$PWD/build/libfa3.so" 128 0 2048,4096,8192,16384 12 fa3,fa3-prev
cd "$OUT" && cat gpu.txt p2*.log p3*.log > logs.txt; cat p2*/*.md p3*/*.md > tables.md
tar czf tables.tgz p23_* p34_*; rm -rf p23_* p34_*
