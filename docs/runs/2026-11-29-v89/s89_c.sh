#!/bin/bash
# v89, call 3: v89b, the converter CTAs with bulk copies of the accumulator blocks (kBuffers in
# flight): A/B against v84's cubins (.prev/libfa3_v87host.so) in one process per dtype, the
# order rotating; v89a (.prev/libfa3_v89a.so) with every converter after the last tile
# (FA3_LAB_CONVERT_WAVES=1000: the v43b early start's shape) against the same; then, if v89b's
# bf16 geometric mean from 2k is at least 1.000, every backward GPU test but [large].
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v87host.so, .prev/libfa3_v89a.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v87host.so .prev/libfa3_v89a.so
ab_bwd ab .prev/libfa3_v87host.so 64,128,256 0,1 1024,2048,4096,8192,16384 6 fa3,fa3-prev
(export FA3_LAB_CONVERT_WAVES=1000 AB_DTYPES=bf16 AB_LIB=$PWD/.prev/libfa3_v89a.so
 ab_bwd tail .prev/libfa3_v87host.so 64,128,256 0,1 1024,2048,4096,8192,16384 6 fa3,fa3-prev)
gm=$(grep -o "from 2k: geometric mean [0-9.]*" "$OUT/ab_bf16.log" | grep -o "[0-9.]*$")
echo "v89b bf16 from 2k: $gm"
if awk "BEGIN{exit !($gm >= 1.0)}"; then step bwd_tests 260 build/fa3_tests '[gpu][backward]~[large]'; fi
