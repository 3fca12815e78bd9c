#!/bin/bash
# session 63, v63c' (probes, correct gradients): K_j as the RS A operand of S^T (kr, d64
# non-causal only: the causal kernel spills 4-44 bytes with it) and L_i / D_i loaded a column
# pair at a time where used (both kr and jit; jit: that alone, both d64 picks), against the
# production cubins (ctl), compare.py's fp32 check on, then ncu's locked clock at d64 8k.
# Carry: .anchors .gpu/v63
cd "$(dirname "$0")/../../.."
L=.gpu/v63
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
common="--side-by-side --direction bwd --dtype bf16 --hdims 64 --causal 0,1 --public-fa3 .anchors/fa3"
run() {  # name this prev rounds
  local s=$SECONDS
  FA3_LIBRARY=$PWD/$L/libfa3_$2.so PYTHONUNBUFFERED=1 timeout --signal=KILL 200 \
    python3 bench/compare.py $common --seqlens ${SEQLENS:-2048,4096,8192,16384} \
    --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/$L/libfa3_$3.so" --rounds $4 \
    --csv "$OUT/$1.csv" > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? $((SECONDS - s)) s"; grep -E '^\| d[0-9]+( causal)? \| [0-9]+k|this/prev, all|this/public, all|FAIL|fail' "$OUT/$1.log"
}
run kr_vs_ctl kr ctl ${ROUNDS:-10}
run jit_vs_ctl jit ctl ${ROUNDS:-10}
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for cell in "0 dqq_rw_fs$" "1 dqq_pt_causal"; do
  set -- $cell
  for lib in kr jit ctl; do
    FA3_LIBRARY=$PWD/$L/libfa3_$lib.so timeout 120 ncu --metrics $M --csv -k regex:"$2" \
      --launch-skip 1 --launch-count 1 python3 docs/runs/2026-11-28-bwd-v63/ncu63.py 64 $1 8192 > $OUT/ncu.csv 2>/dev/null
    printf 'ncu d64 c%s 8k %-4s ' $1 $lib
    grep -E 'time_duration|cycles_elapsed|pct_of_peak' $OUT/ncu.csv | awk -F'","' '{printf "%s %s  ", $(NF-2), $NF}'; echo
  done
done
rm -f $OUT/ncu.csv
