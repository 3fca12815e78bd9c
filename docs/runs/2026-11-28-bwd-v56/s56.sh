#!/bin/bash
# session 56: v55b's library as kept (commit 385e5d9; its final form had not run on a GPU).
#   s56.sh a: the backward side by side (fa3, fa3-det, public FA3, cuDNN; 8 rounds) and the
#             backward GPU tests
#   s56.sh b: fa3-sass on the backward kernels, the sanitizers on [backward][sanitize],
#             [gpu][large], Python
#   s56.sh c: v55b at 512 and 1k, where its A/Bs had not measured: this library (fa3, fa3-det)
#             against v54a's (.prev/libfa3.so as fa3-prev, fa3-prev-det), d64 and d128, both
#             masks, 8 rounds
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step, ab_bwd
gpu_run_header build/libfa3.so "${@:2}"
if [ "$1" = a ]; then
  SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 8" \
    timeout --signal=KILL 300 tools/gpu-check.sh side-by-side-bwd 2>&1 | tail -4
  step tests 230 build/fa3_tests '[gpu][backward]~[large]'
elif [ "$1" = b ]; then
  step sass_bwd 40 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
  step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
  step large 80 build/fa3_tests '[gpu][large]'
  step python 60 tools/run_python_tests.sh -q
elif [ "$1" = c ]; then
  ab_bwd ab_small .prev/libfa3.so 64,128 0,1 512,1024 8 fa3,fa3-det,fa3-prev,fa3-prev-det
fi
cd "$OUT" && tar czf "run_$1.tgz" --remove-files -- *.log *.txt *.csv *.md */ 2>/dev/null; ls "$OUT"
