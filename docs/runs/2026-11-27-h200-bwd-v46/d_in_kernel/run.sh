#!/bin/bash
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== di tests $(date +%T)"
FA3_TEST_KERNELS=_di timeout 200 build/fa3_tests '[gpu][backward]~[large]' 2>&1 | tee $OUT/di_tests.log | tail -15
echo "== sass $(date +%T)"
timeout 60 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*' > $OUT/sass.log 2>&1; echo rc $?; tail -4 $OUT/sass.log; grep -i fail $OUT/sass.log | head
echo "== ab $(date +%T)"
RUNS="d64b:di:base:bf16:64:0,1:1024,2048,4096,8192,16384 d128b:di:base:bf16:128:0,1:512,1024,8192,16384" ROUNDS=3 TMO=200 .prev/k_ab.sh
