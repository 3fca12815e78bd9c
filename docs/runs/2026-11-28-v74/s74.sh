#!/usr/bin/env bash
# v74: instruction-fetch stalls (ncu stall_no_inst) of the shipped d128 backward picks and the
# public FA3's d128 kernel, bf16 8k, causal and not (gpu-check.sh ncu-bwd, one GPU call).
# Carry: build/libfa3.so, .anchors.
set -u
for c in 1 0; do
  OUT=$OUT/c$c PROFILE_ARGS="--hdim 128 --seqlen 8192 --causal $c" tools/gpu-check.sh ncu-bwd
  for s in fa3 fa3-public; do
    echo "== d128 causal=$c $s"
    python3 tools/ncu_source_blocks.py "$OUT/c$c/source_bwd_$s.csv.gz" --top 3 --reasons
  done
done 2>&1 | tee "$OUT/s74.log"
grep -h -E '^### |Duration|Elapsed Cycles|SM Frequency' "$OUT"/c*/ncu-bwd.log
tar czf "$OUT/v74.tgz" -C "$OUT" c0 c1 s74.log
