#!/bin/bash
# v86, one device call: this session's fa3-bench and Python changes on the GPU, and the probes
# of probe_handles.py. Run from the repository root with carry [build/fa3-bench,
# build/libfa3.so]; logs in $OUT.
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3-bench
# --check at a decode shape: 512 x 32 query rows of one position, sampled (over 4096 rows).
step decode_check 240 build/fa3-bench --seqlen-q 1 --seqlen-k 2k --batch 512 --heads 32 \
  --kv-heads 8 --hdim 128 --causal 0,1 --check --iters 5 --warmup 2
step readme_check 240 build/fa3-bench --hdim 128 --seqlen 8k --causal 0 --check
step fwd_cooldown 240 build/fa3-bench --hdim 64 --seqlen 1k,2k --causal 0 --cooldown 1 \
  --csv "$OUT/fwd.csv"
step bwd_rounds 240 build/fa3-bench --direction bwd --hdim 64 --seqlen 2k --causal 1 \
  --rounds 2 --cooldown 1 --csv "$OUT/bwd.csv"
step python 240 tools/run_python_tests.sh -q
step probe 240 env PYTHONPATH=python FA3_LIBRARY=$PWD/build/libfa3.so python3 docs/runs/2026-11-29-v86/probe_handles.py
