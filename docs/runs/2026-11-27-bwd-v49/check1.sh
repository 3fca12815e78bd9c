#!/bin/bash
# Run from the repository root (it was .gpu/check1.sh there; the cd below assumes that place).
# Full GPU test suite of HEAD (no code change since v48): everything but [large], then [large].
cd "$(dirname "$0")/.."
find build -exec touch {} + 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/info.log
git log -1 --format=%h 2>/dev/null | tee -a $OUT/info.log
s=$SECONDS
timeout --signal=KILL 400 build/fa3_tests '[gpu]~[large]' > $OUT/gpu_not_large.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/gpu_not_large.log
tail -4 $OUT/gpu_not_large.log
s=$SECONDS
timeout --signal=KILL 170 build/fa3_tests '[gpu][large]' --durations yes > $OUT/gpu_large.log 2>&1; echo "rc=$? $((SECONDS-s)) s" >> $OUT/gpu_large.log
tail -12 $OUT/gpu_large.log
