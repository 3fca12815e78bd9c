#!/bin/bash
# v83: the persistent kernels with ordered adds draw every tile, the first one too (bwd_draw_tile:
# a CTA waits only for tiles drawn before, by CTAs that have started), the suspected cause of
# v82's hang. Two builds: this one (ordinary launches) and build/diag/PDL (programmatic dependent
# launch back on: docs/runs/2026-11-28-v83/build_pdl_diag.sh).
#   1. the hanging sequence (the threads test, then the churn tests: deterministic 1200 rows,
#      not deterministic 1200 and 1000) with build/diag/PDL, up to 20 processes, stopping at
#      the first that fails or hangs; then 5 with this build;
#   2. every backward GPU test but the [large] ones, with build/diag/PDL (if 1 passed), else this
#      build;
#   3. build/diag/PDL / this build / the public FA3 / cuDNN, bf16 and fp16, every head dim and
#      mask, 1k-16k; the deterministic mode's cost (d128 4k-16k).
# (s83b.sh: the library chosen from this run, its other GPU checks.)
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/diag/PDL/libfa3.so build/diag/PDL/fa3_tests build/fa3_tests
CHURN='fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
churn() {  # churn BINARY LABEL RUNS
  local i
  for i in $(seq 1 "$3"); do
    step run 100 "$1" --durations yes "$CHURN"
    { echo "== $2 run $i"; cat "$OUT/run.log"; } >> "$OUT/churn.log"
    grep -q "^rc=0" "$OUT/run.log" || return 1
  done
}
pdl_ok=0
churn build/diag/PDL/fa3_tests PDL 20 && pdl_ok=1
churn build/fa3_tests plain 5
rm -f "$OUT/run.log"
if [ $pdl_ok = 1 ]; then tests=build/diag/PDL/fa3_tests; else tests=build/fa3_tests; fi
echo "== backward tests with $tests" | tee -a "$OUT/churn.log"
step backward 300 "$tests" --durations yes '[gpu][backward]~[large]'
# fa3 = build/diag/PDL, fa3-prev = this build (ordinary launches).
AB_LIB=$PWD/build/diag/PDL/libfa3.so ab_bwd ab build/libfa3.so 64,128,256 0,1 \
  1024,2048,4096,8192,16384 8 fa3,fa3-prev,fa3-public,cudnn
AB_LIB=$PWD/build/diag/PDL/libfa3.so AB_DTYPES=bf16 ab_bwd det build/libfa3.so 128 0,1 \
  4096,8192,16384 4 fa3,fa3-det,fa3-prev-det
# Three files back: the logs in one, the tables' markdown in one, the tables' CSVs in a tarball.
cd "$OUT" && cat gpu.txt churn.log backward.log ab_*.log det_*.log > logs.txt 2>/dev/null
cat ab_*/*.md det_*/*.md > tables.md; tar czf tables.tgz ab_* det_*
rm -rf gpu.txt churn.log backward.log ab_* det_*
