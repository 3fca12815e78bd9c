#!/bin/bash
# session 47, H100: the 10-round backward side by side of the shipped build
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee $OUT/gpu.txt
SIDE_BY_SIDE_BWD_ARGS="--systems fa3,fa3-det,fa3-public,cudnn --rounds 10" tools/gpu-check.sh side-by-side-bwd > $OUT/sbs.log 2>&1
grep -E "this/public, from|fa3/cuDNN, from 1k|det/default, from 2k" $OUT/sbs.log
rm -f $OUT/side_by_side_bwd_*.md
