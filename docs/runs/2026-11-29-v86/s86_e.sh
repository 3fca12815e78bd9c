#!/bin/bash
# v86: the session's compare.py and gpu-check.sh changes on the GPU. Carry build/libfa3.so,
# build/fa3-bench, .prev/libfa3_v83.so, .anchors; logs in $OUT.
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3-bench
step gpucheck 200 env OUT="$OUT/gc" tools/gpu-check.sh info bench
step python 240 tools/run_python_tests.sh -q
# A shape where the public FA3 is left out by name: three systems asked, two timed, 6 rounds.
step sbs_bwd 240 env PYTHONUNBUFFERED=1 python3 bench/compare.py --side-by-side --direction bwd \
  --dtype bf16 --hdims 64 --causal 1 --seqlens 1024,4096 --systems fa3,fa3-public,cudnn \
  --public-fa3 .anchors/fa3 --out-dir "$OUT/sbs"
step sbs_fwd_quick 240 env PYTHONUNBUFFERED=1 python3 bench/compare.py --quick --hdims 128 \
  --causal 0 --iters 7 --warmup 0
