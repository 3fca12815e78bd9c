#!/bin/bash
# session 48: S^T's and dP^T's accumulators start at -L/scale and -D (lab FA3_LAB_STATS_IN_ACC, d64 cubins) against HEAD
export ROUNDS=${ROUNDS:-6} TMO=240
RUNS="c_bf16:acc:head:bf16:64:1:1024,2048,4096,8192,16384 nc_bf16:acc:head:bf16:64:0:2048,4096,8192,16384 c_fp16:acc:head:fp16:64:1:1024,2048,4096,8192,16384 nc_fp16:acc:head:fp16:64:0:2048,4096,8192,16384" bash .prev/k_ab2.sh
