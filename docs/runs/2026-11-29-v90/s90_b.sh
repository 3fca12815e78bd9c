#!/bin/bash
# v90, call 2: the split last wave again against v84's cubins (8 rounds, d128 non-causal and
# causal as the control); a probe library (.prev/libfa3_v90pt.so: this build with the table's
# d128 causal entries all on the persistent _dqh_fs_pt_causal, table only) against this build
# at d128 causal 4k-16k; then fa3-sass, Python and the [large] backward cases on this build.
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass, .prev/libfa3_v87host.so,
# .prev/libfa3_v90pt.so, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass .prev/libfa3_v87host.so .prev/libfa3_v90pt.so
ab_bwd conf .prev/libfa3_v87host.so 128 0,1 2048,4096,8192,16384 8 fa3,fa3-prev
(export AB_LIB=$PWD/.prev/libfa3_v90pt.so; ab_bwd pt "$PWD/build/libfa3.so" 128 1 4096,8192,16384 8 fa3,fa3-prev)
step sass 100 build/fa3-sass --lib build/libfa3.so
step python 60 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step bwd_large 150 build/fa3_tests '[gpu][backward][large]'
for d in conf_bf16 conf_fp16 pt_bf16 pt_fp16; do cat "$OUT/$d"/*.md; done > "$OUT/tables.md"
