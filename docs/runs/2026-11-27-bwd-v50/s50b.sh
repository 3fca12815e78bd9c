#!/bin/bash
# session 50: v50b' probe: one 128-row TMA box for Q_i and dO_i (q_box_rows = block_m) in the
# d64 m128 kernels; build/ is that library (.prev/libfa3_qb.so), .prev/libfa3_head.so HEAD's
cd "$(dirname "$0")/.."
find build -exec touch {} + 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$SECONDS; timeout --signal=KILL 230 build/fa3_tests '[gpu][backward]~[large]' > $OUT/tests.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/tests.log; tail -3 $OUT/tests.log
export ROUNDS=${ROUNDS:-6} TMO=170
RUNS="qb_bf16:qb:head:bf16:64:0,1:2048,4096,8192,16384 qb_fp16:qb:head:fp16:64:0,1:2048,4096,8192,16384" bash .prev/k_ab.sh
