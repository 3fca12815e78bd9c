#!/bin/bash
# For the session after v83 (written without device time left; not yet run). Build first:
# `make -j2 && docs/runs/2026-11-28-v83/build_pdl_diag.sh`; carry build/fa3_tests,
# build/libfa3.so, build/diag/PDL/fa3_tests.
#   a: 1. the churn tests with this build (the poison fill now awaited), up to 10 processes;
#      2. the same with build/diag/PDL (programmatic launches), up to 10 processes, stopping at
#         the first failure: if the caller-workspace sections now pass and only the handle's
#         pool section fails, v83's illegal addresses were the test's race;
#      3. the pool section alone with build/diag/PDL, deterministic and not, 5 processes each.
#   b: the backward's [large] cases, then the forward's Q/O one (each call under 600 s).
#   c: the forward's K/V [large] case alone.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
CHURN='fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
POOL='no waiting between them, with the handle'"'"'s: a workspace is passed on only once its call has run'
case ${1:-a} in
  a)
    gpu_run_header build/libfa3.so build/fa3_tests build/diag/PDL/fa3_tests
    churn plain 10 build/fa3_tests "$CHURN"
    churn PDL 10 build/diag/PDL/fa3_tests "$CHURN"
    churn "PDL pool, deterministic" 5 build/diag/PDL/fa3_tests \
      'fa3_backward: streams made and dropped per call*' -c "$POOL"
    churn "PDL pool, not deterministic" 5 build/diag/PDL/fa3_tests \
      'fa3_backward: streams per call, not deterministic, 1200*' -c "$POOL"
    rm -f "$OUT/run.log"
    cd "$OUT" && cat gpu.txt churn.log > logs.txt && rm gpu.txt churn.log ;;
  b)
    gpu_run_header build/libfa3.so build/fa3_tests
    step large_bwd 300 build/fa3_tests --durations yes '[gpu][backward][large]'
    step large_fwd_qo 280 build/fa3_tests --durations yes 'fa3_forward with Q and O over 2^31 elements' ;;
  c)
    gpu_run_header build/libfa3.so build/fa3_tests
    step large_fwd_kv 560 build/fa3_tests --durations yes 'fa3_forward with K and V over 2^31 elements' ;;
esac
