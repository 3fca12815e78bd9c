#!/bin/bash
# session 60, v60a' (diagnostic): what the issue's dQ path (a dQ-writer warp's bulk reduce-add
# from shared memory, no per-thread atomics on the hot path) costs against the consumers
# adding their dQ parts themselves with red.global.add.v4.f32 from registers.
# Three libraries, built here from lab/bwd_red_dq_diagnostics.patch (README.md):
#   p0   the shipped library with the bf16 d64 / d128 picks replaced by one-tile kernels
#        without first stores: _dqq_rw, _dqq_causal, _dqt_rw (from 1024 rows), _dqh_p32_causal
#   red  the same four kernels and runtime built with FA3_DIAG_RED_DQ=1
#   ship the shipped library (md5 bfa61807...)
# Carry: .anchors .gpu/v60
cd "$(dirname "$0")/../../.."
L=.gpu/v60
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum $L/*.so | tee -a "$OUT/gpu.txt"
common="--side-by-side --direction bwd --dtype bf16 --hdims 64,128 --causal 0,1 --public-fa3 .anchors/fa3"
# Smoke: red against p0 at 2k, one round, gradients checked against fp32 (compare.py's verdict).
s=$SECONDS
FA3_LIBRARY=$PWD/$L/libfa3_red.so timeout --signal=KILL 90 python3 bench/compare.py $common \
  --seqlens 2048 --systems fa3,fa3-prev --prev-lib "$PWD/$L/libfa3_p0.so" --rounds 1 \
  > "$OUT/smoke.log" 2>&1
echo "smoke rc=$? $((SECONDS - s)) s"; tail -12 "$OUT/smoke.log"
for v in ${RUNS:-p0 ship}; do
  s=$SECONDS
  FA3_LIBRARY=$PWD/$L/libfa3_red.so PYTHONUNBUFFERED=1 timeout --signal=KILL ${LIMIT:-230} \
    python3 bench/compare.py $common --seqlens ${SEQLENS:-2048,4096,8192,16384} \
    --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/$L/libfa3_$v.so" --rounds ${ROUNDS:-8} \
    --csv "$OUT/red_vs_$v.csv" > "$OUT/red_vs_$v.log" 2>&1
  echo "red vs $v rc=$? $((SECONDS - s)) s"
  tail -30 "$OUT/red_vs_$v.log"
done
