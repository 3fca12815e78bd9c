#!/bin/bash
# session 63, v63a' at ncu's locked clock, where the data cannot move the clock (at the power
# cap it does: nod_a against nod, s63.sh): the main kernel's duration and cycles, rs / nod /
# ctl (and the first call's rs_a / nod_a), bf16 8k. Carry: .anchors .gpu/v63
cd "$(dirname "$0")/../../.."
L=.gpu/v63
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for cell in "64 0 dqq_rw_fs$" "64 1 dqq_pt_causal" "128 1 dqh_fs_pt_causal$" "128 0 _dqh$"; do
  set -- $cell
  libs="rs nod ctl"; [ "$1" = 64 ] || [ "$2" = 1 ] && libs="rs nod ctl rs_a nod_a"
  for lib in $libs; do
    f=$OUT/ncu_d$1_c$2_$lib.csv
    FA3_LIBRARY=$PWD/$L/libfa3_$lib.so timeout 120 ncu --metrics $M --csv -k regex:"$3" \
      --launch-skip 1 --launch-count 1 python3 docs/runs/2026-11-28-bwd-v63/ncu63.py $1 $2 8192 > $f 2>/dev/null
    printf '%-4s c%s %-6s ' $1 $2 $lib
    grep -E 'time_duration|cycles_elapsed|pct_of_peak|wavefronts' $f | awk -F'","' '{printf "%s %s  ", $(NF-2), $NF}'; echo
  done
done
