#!/bin/bash
# session 60, v60b' (diagnostic): what the exponentials' MUFU.EX2 cost the step. The shipped
# bf16 d64 / d128 picks built with FA3_DIAG_NO_EXP=1 (lab/bwd_no_exp_diagnostics.patch: P
# from two FFMA and an FMNMX instead of FFMA and MUFU.EX2, values in [0, 1]; wrong gradients,
# timed with compare.py's verdict disabled in a temporary copy) against the same five cubins
# built without it (ctl, the same build recipe) and the public FA3.
# Carry: .anchors .gpu/v60
cd "$(dirname "$0")/../../.."
L=.gpu/v60
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum $L/*.so | tee -a "$OUT/gpu.txt"
common="--side-by-side --direction bwd --dtype bf16 --hdims 64,128 --causal 0,1 --public-fa3 .anchors/fa3"
sed 's/^    if over:$/    if over and False:/' bench/compare.py > bench/compare_nochk.py
grep -c 'if over and False:' bench/compare_nochk.py
s=$SECONDS
FA3_LIBRARY=$PWD/$L/libfa3_noexp.so PYTHONUNBUFFERED=1 timeout --signal=KILL 230 \
  python3 bench/compare_nochk.py $common --seqlens ${SEQLENS:-2048,4096,8192,16384} \
  --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/$L/libfa3_ctl.so" --rounds ${ROUNDS:-8} \
  --csv "$OUT/noexp_vs_ctl.csv" > "$OUT/noexp_vs_ctl.log" 2>&1
echo "noexp vs ctl rc=$? $((SECONDS - s)) s"; tail -28 "$OUT/noexp_vs_ctl.log"
s=$SECONDS
FA3_LIBRARY=$PWD/$L/libfa3_ctl.so PYTHONUNBUFFERED=1 timeout --signal=KILL 150 \
  python3 bench/compare.py $common --seqlens 2048,16384 \
  --systems fa3,fa3-prev --prev-lib "$PWD/$L/libfa3_ship.so" --rounds 4 \
  --csv "$OUT/ctl_vs_ship.csv" > "$OUT/ctl_vs_ship.log" 2>&1
echo "ctl vs ship rc=$? $((SECONDS - s)) s"; tail -14 "$OUT/ctl_vs_ship.log"
rm -f bench/compare_nochk.py
