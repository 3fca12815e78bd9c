#!/bin/bash
# v93, call 3: the sanitizers' backward cases with the new split case (every compiled kernel
# that splits, by name, on 2 tiles in 4 chunks), in a mini lab build (the production set plus
# the lab's persistent non-causal kernels: d64 _dqq_rw_pt and d128 _dqt_pt, f16 and bf16; its
# library is built from the same sources as 62a96ac5) and in the production build; then the
# mini lab build's d64 non-causal kernels timed side by side (fa3-bench --all-configs, bf16).
# Carry build/fa3_tests, build/labmini/fa3_tests, build/labmini/fa3-bench.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/fa3_tests build/labmini/fa3_tests build/labmini/fa3-bench
step sanitize_lab 260 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/labmini/fa3_tests
step sanitize 230 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step bench_d64 150 build/labmini/fa3-bench --direction bwd --dtype bf16 --hdim 64 --causal 0 \
  --seqlen 2k,4k,8k,16k --all-configs --rounds 3 --iters 20
