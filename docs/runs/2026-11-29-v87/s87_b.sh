#!/bin/bash
# v87, call 2: the sanitizers on the backward's [sanitize] cases, fa3-sass (text and JSON, as
# tools/gpu-check.sh's sass step), fa3-bench's changed paths, and the forward's GPU tests on
# this library's host code. Carry build/libfa3.so, build/fa3_tests, build/fa3-bench,
# build/fa3-sass.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-bench build/fa3-sass
step sanitize 260 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step sass 120 build/fa3-sass --lib build/libfa3.so
step sass_json 120 bash -c 'build/fa3-sass --lib build/libfa3.so --json > "$OUT/sass.json"'
gzip -f "$OUT/sass.json"
# An output file that cannot be written: exit 2 once the GPU is opened, nothing run.
step bench_bad_csv 60 build/fa3-bench --hdim 128 --seqlen 2k --causal 0 --csv /nonexistent/dir/x.csv
# The baseline in --rounds, checked.
step bench_rounds 120 build/fa3-bench --hdim 64 --seqlen 1k,2k --causal 0 --rounds 3 \
  --cooldown 1 --check --csv "$OUT/bench_rounds.csv"
step fwd_tests 240 build/fa3_tests '[gpu]~[backward]~[large]'
