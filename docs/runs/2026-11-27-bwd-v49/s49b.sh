#!/bin/bash
# session 49: the default mode's small d64 causal calls (ordered adds) in the last-first order
# (the _lf entry) against K/V block order (HEAD); 2048 a control (unordered, same code)
export ROUNDS=${ROUNDS:-8} TMO=200
RUNS="lf_bf16:lf:head:bf16:64:1:256,384,512,640,768,896,1024,2048 lf_fp16:lf:head:fp16:64:1:256,384,512,640,768,896,1024,2048" bash .prev/k_ab.sh
