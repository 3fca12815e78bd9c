#!/usr/bin/env bash
# v74: instruction-fetch stalls (ncu stall_no_inst) of the shipped backward picks and the
# public FA3's kernels, bf16 8k, causal and not (gpu-check.sh ncu-bwd), for the head dims in
# $HDIMS (default 128). Carry: build/libfa3.so, .anchors.
set -u
for d in ${HDIMS:-128}; do
  for c in 1 0; do
    OUT=$OUT/d${d}_c$c PROFILE_ARGS="--hdim $d --seqlen 8192 --causal $c" tools/gpu-check.sh ncu-bwd
    for s in fa3 fa3-public; do
      echo "== d$d causal=$c $s"
      python3 tools/ncu_source_blocks.py "$OUT/d${d}_c$c/source_bwd_$s.csv.gz" --top 3 --reasons
    done
  done
done 2>&1 | tee "$OUT/s74.log"
grep -h -E '^### |Duration|Elapsed Cycles|SM Frequency' "$OUT"/d*_c*/ncu-bwd.log
