#!/bin/bash
# v83b: after h200_a (build/diag/PDL failed its first churn run with an illegal address; this
# build passed 5 of 5 and every backward GPU test). Ordinary launches stay; this build is the
# candidate.
#   a: 1. the churn tests with build/diag/PDL under CUDA_DEVICE_MAX_CONNECTIONS 1, the default
#         (8) and 32, 3 processes each (stopping at the first failure of each): does the
#         failure follow the streams' sharing of hardware queues?
#      2. the backward's sanitizers on its [sanitize] cases, then every other [gpu] test but
#         the [large] ones;
#      3. this build / v82's (.prev/libfa3_v82.so: the first tile by blockIdx.x), default and
#         deterministic, where the change acts: the deterministic mode, and the default
#         mode's small causal calls (ordered adds) at d64 and d128.
#   b: the [large] cases and the Python suite.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
case ${1:-a} in
  a)
    gpu_run_header build/libfa3.so build/fa3_tests build/diag/PDL/fa3_tests .prev/libfa3_v82.so
    CHURN='fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
    for conn in 1 8 32; do
      for i in 1 2 3; do
        step run 100 env CUDA_DEVICE_MAX_CONNECTIONS=$conn build/diag/PDL/fa3_tests "$CHURN"
        { echo "== PDL connections $conn run $i"; grep -m3 "illegal\|unfinished\|FAILED" "$OUT/run.log";
          tail -n 3 "$OUT/run.log"; } >> "$OUT/churn.log"
        grep -q "^rc=0" "$OUT/run.log" || break
      done
    done
    rm -f "$OUT/run.log"
    step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
    step rest 300 build/fa3_tests --durations yes '[gpu]~[backward]~[large]'
    AB_DTYPES=bf16 ab_bwd fix .prev/libfa3_v82.so 64,128 0,1 512,1024,4096,8192,16384 4 \
      fa3,fa3-det,fa3-prev,fa3-prev-det
    cd "$OUT" && cat gpu.txt churn.log sanitize.log rest.log fix_*.log > logs.txt
    cat fix_*/*.md > tables.md; tar czf tables.tgz fix_*
    rm -rf gpu.txt churn.log sanitize.log rest.log fix_* ;;
  b)
    gpu_run_header build/libfa3.so build/fa3_tests
    step large 560 build/fa3_tests --durations yes '[gpu][large]'
    step python 200 tools/run_python_tests.sh -q
    cd "$OUT" && cat gpu.txt large.log python.log > logs.txt && rm gpu.txt large.log python.log ;;
esac
