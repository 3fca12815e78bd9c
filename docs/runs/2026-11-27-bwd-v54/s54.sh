#!/bin/bash
# session 54: v53d's library (commit 503359d, libfa3.so md5 1fd0002f...) on the GPU, by way of
# session 53's scripts (docs/runs/2026-11-27-bwd-v53):
#   s54.sh a: the _pt walk test and the d64 causal A/B against v53a (.prev/libfa3.so, md5
#             b132cdbb...), then the full backward side by side (fa3, fa3-det, public FA3,
#             cuDNN; 8 rounds) and the backward GPU tests
#   s54.sh b: fa3-sass on the backward kernels, the sanitizers on [backward][sanitize], [gpu][large],
#             Python
cd "$(dirname "$0")/../../.."
v53=docs/runs/2026-11-27-bwd-v53
if [ "$1" = a ]; then
  $v53/s53c.sh a quick && mv "$OUT/run_a.tgz" "$OUT/ab_vs_v53a.tgz"
  $v53/s53.sh a && mv "$OUT/run_a.tgz" "$OUT/side_by_side_and_tests.tgz"
else
  $v53/s53.sh b
fi
ls "$OUT"
