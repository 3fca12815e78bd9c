#!/bin/bash
# session 53, v53a: K_j double-buffered in the d64 _pt kernels (BwdConfig::k_double_buffered).
#   s53c.sh a: the _pt walk test first (a wrong barrier count hangs: 120 s), the A/B against the
#             shipped library (.prev/libfa3.so) at d64 causal, then (not with `a quick`) the backward
#             GPU tests
#   s53c.sh b: the A/B with 24 rounds from 2k, the sanitizers on [backward][sanitize], fa3-sass on
#             the backward kernels
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step, pt_walk_first, ab_bwd
gpu_run_header build/libfa3.so .prev/libfa3.so
if [ "$1" = a ]; then
  pt_walk_first || exit 1
  for dtype in bf16 fp16; do
    step ab_$dtype 200 env PYTHONUNBUFFERED=1 FA3_LIBRARY="$PWD/build/libfa3.so" \
      python3 bench/compare.py --side-by-side --direction bwd --dtype $dtype --hdims 64 \
      --causal 1 --seqlens 1024,2048,4096,8192,16384 --systems fa3,fa3-prev,fa3-public \
      --rounds 8 --prev-lib .prev/libfa3.so --public-fa3 .anchors/fa3 --out-dir "$OUT"
  done
  [ "$2" = quick ] || step tests 230 build/fa3_tests '[gpu][backward]~[large]'
else
  # b: the A/B again with more rounds (2k-16k), then the checks a kept kernel needs
  for dtype in bf16 fp16; do
    step ab24_$dtype 200 env PYTHONUNBUFFERED=1 FA3_LIBRARY="$PWD/build/libfa3.so" \
      python3 bench/compare.py --side-by-side --direction bwd --dtype $dtype --hdims 64 \
      --causal 1 --seqlens 2048,4096,8192,16384 --systems fa3,fa3-prev,fa3-public \
      --rounds 24 --prev-lib .prev/libfa3.so --public-fa3 .anchors/fa3 --out-dir "$OUT"
  done
  step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
  step sass_bwd 40 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
fi
cd "$OUT" && tar czf "run_$1.tgz" --remove-files -- *.log *.txt *.csv *.md 2>/dev/null; ls "$OUT"
