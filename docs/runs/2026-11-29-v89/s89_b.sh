#!/bin/bash
# v89, call 2: v89a, converter CTAs in the one-tile main grids (lab knobs FA3_LAB_CONVERT_KB,
# FA3_LAB_CONVERT_WAVES): every backward GPU test but [large]; then A/Bs against v84's cubins
# (.prev/libfa3_v87host.so) in one process per dtype, the order rotating.
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v87host.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v87host.so
step bwd_tests 260 build/fa3_tests '[gpu][backward]~[large]'
ab_bwd ab .prev/libfa3_v87host.so 64,128,256 0,1 1024,2048,4096,8192,16384 6 fa3,fa3-prev
(export FA3_LAB_CONVERT_KB=128 AB_DTYPES=bf16; ab_bwd kb128 .prev/libfa3_v87host.so 64,128,256 0,1 2048,4096,8192,16384 6 fa3,fa3-prev)
(export FA3_LAB_CONVERT_WAVES=2.5 AB_DTYPES=bf16; ab_bwd w25 .prev/libfa3_v87host.so 64,128,256 0,1 2048,4096,8192,16384 6 fa3,fa3-prev)
