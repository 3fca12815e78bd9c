#!/bin/bash
# v84: the early-start code (BwdParams::post_early, the pair counters, the postprocess's share
# of a persistent grid) out of the backward kernels and the runtime; every backward cubin
# changes. Carry build/fa3_tests, build/libfa3.so, build/fa3-sass, .prev/libfa3_v83.so.
#   a: the persistent walk test first (a wrong barrier hangs), every backward GPU test but the
#      [large] ones, the churn tests 3 times, fa3-sass on the backward kernels, this build /
#      v83's in one process (bf16 and fp16, every head dim and mask, 1k-16k) and the
#      deterministic mode's cost at d128.
#   b: the backward's sanitizers, its [large] cases, the Python suite.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
CHURN='fa3_backward: threads and streams at once*,fa3_backward: streams made and dropped per call*,fa3_backward: streams per call*'
case ${1:-a} in
  a)
    gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass .prev/libfa3_v83.so
    pt_walk_first || { cat "$OUT/gpu.txt" "$OUT/pt_walk.log" > "$OUT/logs.txt"; exit 1; }
    step backward 300 build/fa3_tests --durations yes '[gpu][backward]~[large]'
    churn plain 3 build/fa3_tests "$CHURN"
    rm -f "$OUT/run.log"
    step sass 120 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
    build/fa3-sass --lib build/libfa3.so --json 'fa3_bwd_*' > "$OUT/sass.json" 2>&1
    ab_bwd ab .prev/libfa3_v83.so 64,128,256 0,1 1024,2048,4096,8192,16384 6
    AB_DTYPES=bf16 ab_bwd det .prev/libfa3_v83.so 128 0,1 4096,8192,16384 4 fa3,fa3-det,fa3-prev-det
    cd "$OUT" && cat gpu.txt pt_walk.log backward.log churn.log sass.log ab_*.log det_*.log > logs.txt
    cat ab_*/*.md det_*/*.md > tables.md; tar czf tables.tgz ab_* det_*
    rm -rf gpu.txt pt_walk.log backward.log churn.log sass.log ab_* det_* ;;
  b)
    gpu_run_header build/libfa3.so build/fa3_tests
    step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
    step large_bwd 200 build/fa3_tests --durations yes '[gpu][backward][large]'
    step python 100 tools/run_python_tests.sh -q
    cd "$OUT" && cat gpu.txt sanitize.log large_bwd.log python.log > logs.txt
    rm gpu.txt sanitize.log large_bwd.log python.log ;;
esac
