#!/bin/bash
# session 75: a standing check of the shipped library (commit 74d6a7b's, unchanged since v56's
# md5): the backward side by side (fa3, fa3-det, public FA3, cuDNN; 8 rounds; tables printed
# to stdout, as only a few files come back) and the backward GPU tests, in one device call.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step
gpu_run_header build/libfa3.so
SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 8" \
  timeout --signal=KILL 300 tools/gpu-check.sh side-by-side-bwd 2>&1 | tail -4
for d in bf16 fp16; do echo "== side_by_side_bwd_$d.md"; cat "$OUT/side_by_side_bwd_$d.md"; done
step tests 240 build/fa3_tests '[gpu][backward]~[large]'
cd "$OUT" && tar czf run.tgz --remove-files -- *.log *.txt *.csv *.md 2>/dev/null; ls "$OUT"
