#!/bin/bash
# v92, call 3, on c2cf5a56 (the kernel change of 47ea861c reverted: every cubin is v91's; the
# host changes kept): this / 47ea861c (.prev/libfa3_v92rw.so, every _rw kernel's start without
# a 64-bit division) at d64 and d256 non-causal, a second reading of call 1's d64 loss, 12
# rounds; then the _pt walk test, every backward GPU test but [large], and the sanitizers on
# the backward's cases.
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v92rw.so.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v92rw.so
ab_bwd rw2 "$PWD/.prev/libfa3_v92rw.so" 64,256 0 1024,4096,16384 12 fa3,fa3-prev
pt_walk_first || { tail -20 "$OUT/pt_walk.log"; exit 1; }
step bwd_tests 260 build/fa3_tests '[gpu][backward]~[large]'
step sanitize 200 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
cd "$OUT" && cat gpu.txt rw2_*.log > logs.txt; cat rw2_*/*.md > tables.md
tar czf tables.tgz rw2_*; rm -rf rw2_*
