#!/bin/bash
# session 47: d64 causal 12k-16k: ot1 = the one-tile _dqq_causal with the next-step dQ publish;
# ptall = the persistent _pt (v46f) at every length; against the shipped v47 library
nvidia-smi --query-gpu=name --format=csv,noheader
export ROUNDS=${ROUNDS:-8} TMO=150
RUNS="ot1:ot1:v47:bf16:64:1:8192,12288,16384 ot1f:ot1:v47:fp16:64:1:8192,12288,16384 pt:ptall:v47:bf16:64:1:12288,16384 ptf:ptall:v47:fp16:64:1:12288,16384" .prev/k_ab.sh
