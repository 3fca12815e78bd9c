#!/bin/bash
# (.prev/k_ab.sh is docs/runs/2026-11-27-h200-bwd-v44/k_ab.sh)
# session 48: the persistent grids with no SM left to the postprocess (n0) against HEAD (2 of 132)
export ROUNDS=${ROUNDS:-6} TMO=240
RUNS="d64c_bf16:n0:head:bf16:64:1:2048,4096,8192,12288,16384 d128_bf16:n0:head:bf16:128:0:4096,8192,16384 d64c_fp16:n0:head:fp16:64:1:2048,4096,8192,12288,16384 d128_fp16:n0:head:fp16:128:0:4096,8192,16384" bash .prev/k_ab.sh
