#!/bin/bash
# v86, the plain backward's D in softmax's form (sum_j P dP over the 16-bit P and dP): the
# backward tests and fa3-bench's backward check held to it. Carry [build/fa3_tests,
# build/libfa3.so, build/fa3-bench]; logs in $OUT.
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-bench
step bench_one_key 240 build/fa3-bench --direction bwd --seqlen-q 1000 --seqlen-k 1 --batch 2 \
  --heads 8 --kv-heads 2 --hdim 64,128,256 --dtype bf16,fp16 --causal 0,1 --iters 3 --warmup 1
step bench_grid 240 build/fa3-bench --direction bwd --hdim 64,128,256 --dtype bf16 --causal 0,1 \
  --seqlen 1k --iters 3 --warmup 1
step backward 420 build/fa3_tests '[gpu][backward]~[large]' -w NoTests
step backward_large 300 build/fa3_tests '[gpu][backward][large]' -w NoTests
