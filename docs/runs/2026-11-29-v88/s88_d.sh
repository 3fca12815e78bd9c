#!/bin/bash
# v88, call 4: the tail of the d128 non-causal pick's last wave (helper-41's candidate A, v41a'
# weighed it at "at most ~1%"): bf16 d128 non-causal backward, batch 1 x 16 heads at
# seqlen_q 16k with seqlen_k 16384 / 16896 / 17408 (2048 / 2112 / 2176 tiles of 128 keys on
# 132 SMs: 15.52 / 16.0 / 16.48 waves), and batch 2 x 16 heads at 8k with 8192 / 8448 / 8704.
# TFLOPS count the exact FLOPs, so a full last wave shows as more TFLOPS. Two rounds, the
# shapes in turn. Carry build/libfa3.so, build/fa3-bench.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3-bench
for round in 1 2; do
  for shape in "1 16384 16384" "1 16384 16896" "1 16384 17408" "2 8192 8192" "2 8192 8448" "2 8192 8704"; do
    set -- $shape
    echo "== round $round batch $1 seqlen_q $2 seqlen_k $3" >> "$OUT/tail.log"
    timeout 40 build/fa3-bench --direction bwd --dtype bf16 --hdim 128 --causal 0 --heads 16 \
      --batch "$1" --seqlen-q "$2" --seqlen-k "$3" --iters 50 2>&1 | grep -E "^bwd|rc|error" >> "$OUT/tail.log"
  done
done
cat "$OUT/tail.log"
