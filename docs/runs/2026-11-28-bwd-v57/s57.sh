#!/bin/bash
# session 57, v57a' (diagnostic): what the L2 traffic of the dQ adds and of the Q_i / dO_i
# loads costs the long calls at the power cap. Three libraries, each the shipped one with the
# bf16 d64 / d128 picks rebuilt from the lab patch lab/bwd_l2_traffic_diagnostics.patch (wrong
# gradients, timing only), against the shipped library (fa3-prev) and the public FA3 in one
# process, the order rotating, compare.py's gradient verdict disabled in a copy:
#   diagA  -DFA3_DIAG_NO_DQ_ADD=1    the dQ writer issues no bulk reduce-add or store
#   diagC  -DFA3_DIAG_NO_QDO_LOAD=1  Q_i and dO_i loaded for a CTA's first two steps only
#   diagAC both
# Carry: .anchors .prev/libfa3_ship.so .prev/libfa3_diagA.so .prev/libfa3_diagC.so
#        .prev/libfa3_diagAC.so
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum .prev/libfa3_ship.so .prev/libfa3_diag*.so | tee -a "$OUT/gpu.txt"
sed 's/^    if over:$/    if over and False:/' bench/compare.py > bench/compare_nochk.py
grep -c 'if over and False:' bench/compare_nochk.py
for v in ${VARIANTS:-A C AC}; do
  s=$SECONDS
  FA3_LIBRARY=$PWD/.prev/libfa3_diag$v.so PYTHONUNBUFFERED=1 timeout --signal=KILL 170 \
    python3 bench/compare_nochk.py --side-by-side --direction bwd --dtype bf16 --hdims 64,128 \
    --causal 0,1 --seqlens ${SEQLENS:-2048,4096,8192,16384} --systems fa3,fa3-prev,fa3-public \
    --prev-lib "$PWD/.prev/libfa3_ship.so" --public-fa3 .anchors/fa3 --rounds ${ROUNDS:-8} \
    --csv "$OUT/diag$v.csv" > "$OUT/diag$v.log" 2>&1
  echo "diag$v rc=$? $((SECONDS - s)) s"
done
rm -f bench/compare_nochk.py
