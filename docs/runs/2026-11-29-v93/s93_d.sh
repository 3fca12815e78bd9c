#!/bin/bash
# v93, call 4 (probe): the mini lab build's d64 non-causal persistent kernel (_dqq_rw_pt, which
# splits its last wave in that build) against the pick (_dqq_rw_fs, a CTA a tile), bf16, the
# paper grid's 4k and 16k (its d64 cells under 1.05x), by a tuning table that picks it
# (table_d64_rw_pt.json); fa3-bench (checked against float64 first), two processes each,
# alternating. Carry build/labmini/fa3-bench.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/labmini/fa3-bench
T=docs/runs/2026-11-29-v93/table_d64_rw_pt.json
B=(build/labmini/fa3-bench --direction bwd --dtype bf16 --hdim 64 --causal 0 --seqlen 4k,16k --iters 40)
for r in 1 2; do
  step pick_$r 90 "${B[@]}"
  step rw_pt_$r 90 "${B[@]}" --table $T
done
