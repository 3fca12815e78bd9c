#!/bin/bash
# session 49: v49b' probe: the default mode's ordered adds (last-first, _lf) for d64 causal
# calls up to 2048 rows instead of 1024, against v49a's library; 1024 and 2560 are controls
export ROUNDS=${ROUNDS:-8} TMO=150
RUNS="o2k_bf16:o2k:v49:bf16:64:1:1024,1152,1280,1536,1792,2048,2560 o2k_fp16:o2k:v49:fp16:64:1:1024,1152,1280,1536,1792,2048,2560" bash .prev/k_ab.sh
