#!/bin/bash
# session 53: the shipped library (1c2f71c's cubins) on an H100.
#   s53.sh a: the backward side by side (fa3, fa3-det, public FA3, cuDNN; 8 rounds) and the
#             backward GPU tests
#   s53.sh b: fa3-sass on the backward kernels, the sanitizers on [backward][sanitize],
#             [gpu][large], Python
#   s53.sh c: (v53a's library) the side by side as in a, [gpu][large], Python
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step, ab_bwd
gpu_run_header build/libfa3.so
if [ "$1" = c ]; then
  # c: after v53a, the side by side and the checks it had not run: [gpu][large], Python
  SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 8" \
    timeout --signal=KILL 300 tools/gpu-check.sh side-by-side-bwd 2>&1 | tail -4
  step large 80 build/fa3_tests '[gpu][large]'
  step python 60 tools/run_python_tests.sh
elif [ "$1" = a ]; then
  SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 8" \
    timeout --signal=KILL 300 tools/gpu-check.sh side-by-side-bwd 2>&1 | tail -4
  step tests 230 build/fa3_tests '[gpu][backward]~[large]'
else
  step sass_bwd 40 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
  step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
  step large 80 build/fa3_tests '[gpu][large]'
  step python 60 tools/run_python_tests.sh -q
fi
# the device tool returns few files: one archive
cd "$OUT" && tar czf "run_$1.tgz" --remove-files -- *.log *.txt *.csv *.md 2>/dev/null; ls "$OUT"
