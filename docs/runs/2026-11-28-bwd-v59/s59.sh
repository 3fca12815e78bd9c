#!/bin/bash
# session 59, v59a' (diagnostic): what 2-CTA lockstep costs the non-causal dQ path, and what
# half of the dQ adds gives, before a 2-CTA dQ pre-sum is built. Four libraries from
# lab/bwd_pair_lockstep_diagnostics.patch, each the shipped library with the bf16 d64 / d128
# non-causal picks replaced by the one-tile _rw kernels without _fs (fa3_bwd_bf16_d64_m128_
# n128_s2_w2_dqq_rw, fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_rw), built with FA3_DIAG_PAIR:
#   p0  0: the plain kernels (the base of the A/Bs)
#   p1  1 (H): the CTAs of odd K/V blocks issue no dQ add (wrong dQ, timing only)
#   p2  2 (L): 2-CTA clusters of K/V blocks 2k, 2k + 1, one walk start, the dQ writers meeting
#              at every step (correct gradients: compare.py checks them)
#   p3  3 (LH): both (wrong dQ)
#   ship: the shipped library (its _dqq_rw_fs, _dqt_rw_fs_pt picks) against p0
# Carry: .anchors .gpu/v59
cd "$(dirname "$0")/../../.."
L=.gpu/v59
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum $L/*.so | tee -a "$OUT/gpu.txt"
common="--side-by-side --direction bwd --dtype bf16 --hdims 64,128 --causal 0 --public-fa3 .anchors/fa3"
# Smoke: the lockstep kernels at 2k, one round, gradients checked, 60 s at most.
FA3_LIBRARY=$PWD/$L/libfa3_p2.so timeout --signal=KILL 60 python3 bench/compare.py $common \
  --seqlens 2048 --systems fa3,fa3-prev --prev-lib "$PWD/$L/libfa3_p0.so" --rounds 1 \
  > "$OUT/smoke_p2.log" 2>&1
echo "smoke p2 rc=$?"; tail -5 "$OUT/smoke_p2.log"
sed 's/^    if over:$/    if over and False:/' bench/compare.py > bench/compare_nochk.py
grep -c 'if over and False:' bench/compare_nochk.py
for v in ${VARIANTS:-2 1 3 ship}; do
  s=$SECONDS
  script=bench/compare_nochk.py; [ $v = 2 ] || [ $v = ship ] && script=bench/compare.py
  lib=$L/libfa3_p$v.so; [ $v = ship ] && lib=$L/libfa3_ship.so
  FA3_LIBRARY=$PWD/$lib PYTHONUNBUFFERED=1 timeout --signal=KILL 170 \
    python3 $script $common --seqlens ${SEQLENS:-2048,4096,8192,16384} \
    --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/$L/libfa3_p0.so" --rounds ${ROUNDS:-8} \
    --csv "$OUT/p$v.csv" > "$OUT/p$v.log" 2>&1
  echo "p$v rc=$? $((SECONDS - s)) s"
done
rm -f bench/compare_nochk.py
