#!/bin/bash
# v80: the review's mends of the tools on the GPU (no kernel and no library change: libfa3.so
# is v79's d1e7dabf).
#   a: compare.py's new check (test_compare_gpu.py: defects planted in fa3-based systems),
#      fa3-sass over every production kernel (a cubin now checked whole), fa3-tune's backward
#      check in both reduction orders (d64 causal bf16, the _lf entry included), the whole
#      Python suite (the error rule now requires a finite plain error).
#   b: the Python suite again (compare.py's plain attention now computed in 16-bit by explicit
#      ops: SDPA's math backend upcasts), then the backward side by side with compare.py's new check (FlashAttention's rule for every
#      system, both ends of the batch, NaN-poisoned outputs, fa3-det run twice).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
case ${1:-a} in
  a)
    step compare_gpu 150 tools/run_python_tests.sh -q python/tests/test_compare_gpu.py
    step sass 240 build/fa3-sass --lib build/libfa3.so
    step tune 240 build/fa3-tune --direction bwd --dtype bf16 --hdim 64 --causal 1 --quick \
      --out "$OUT/tune_bwd_d64_causal.json"
    step python 150 tools/run_python_tests.sh -q ;;
  b)
    step python 150 tools/run_python_tests.sh -q
    SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 8" \
      timeout --signal=KILL 560 tools/gpu-check.sh side-by-side-bwd > "$OUT/side_by_side.log" 2>&1
    echo "rc=$?" >> "$OUT/side_by_side.log"; tail -4 "$OUT/side_by_side.log"
    for d in bf16 fp16; do echo "== side_by_side_bwd_$d.md"; cat "$OUT/side_by_side_bwd_$d.md"; done ;;
  c)  # after the last test fix: the Python suite, and fa3-bench's deterministic backward
      # check (one run in that order, twice, bit for bit) on GQA-free odd shapes
    step python 150 tools/run_python_tests.sh -q
    step bench_det 200 build/fa3-bench --direction bwd --deterministic --check --dtype bf16,fp16 \
      --hdim 64,128,256 --causal 0,1 --seqlen 1000 --batch 2 --heads 4
    step bench_default 200 build/fa3-bench --direction fwdbwd --check --dtype bf16 \
      --hdim 64,128,256 --causal 0,1 --seqlen-q 1000 --seqlen-k 777 --batch 2 --heads 4 ;;
  d)  # the input sets of small problems (>= 3 x L2 whatever the launch count, the rounds
      # walking on through them): fa3-bench forward and backward rows in 3 rounds, checked
    step bench_small_fwd 120 build/fa3-bench --check --dtype bf16 --hdim 64,128 --causal 0,1 \
      --seqlen 256,1000 --batch 1 --heads 2 --rounds 3
    step bench_small_bwd 120 build/fa3-bench --direction bwd --check --dtype bf16 --hdim 64,128 \
      --causal 0,1 --seqlen 256,1000 --batch 1 --heads 2 --rounds 3
    step bench_grid_row 120 build/fa3-bench --check --dtype bf16 --hdim 128 --causal 0 --seqlen 8k ;;
  e)  # the last Python changes (test_compare_gpu's non-repeating system, one compare.py
      # loader), and the forward side by side under compare.py's new check (quick grid)
    step python 150 tools/run_python_tests.sh -q
    step compare_fwd 400 env PYTHONUNBUFFERED=1 FA3_LIBRARY="$PWD/build/libfa3.so" \
      python3 bench/compare.py --side-by-side --quick --systems fa3,fa3-lse,fa3-public,cudnn \
      --public-fa3 .anchors/fa3 --out-dir "$OUT" ;;
  f)  # the forward GPU tests after their review (whole-tensor poison scans, guards after O
      # and the LSE, empty rows' O exactly 0, a finite plain error, calls without an LSE in
      # the shape matrix, a Q/O-over-2^31 case), and the binding's mends in Python
    step forward 330 build/fa3_tests '[gpu][forward]~[large]'
    step forward_large 200 build/fa3_tests '[gpu][forward][large]'
    step python 60 tools/run_python_tests.sh -q ;;
  g)  # the binding's out= rule (requires grad refused, version counters bumped); run as h
      # after the handle cache's key (the dlopen handle, not the path)
    step python 90 tools/run_python_tests.sh -q ;;
esac
