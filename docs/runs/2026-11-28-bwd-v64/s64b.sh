#!/bin/bash
# session 64, second call: v64b (P^T packed after dP^T's wait, where the shipped kernels pack
# it; dS^T by bwd_ds_packed as v64a) and a repeat of v64a, each against the shipped library,
# d64 (the cells where v64a moved), bf16 and fp16, compare.py with its fp32 check on.
# libfa3_b.so: v64b's cubins, but f16 d128 `_dqh_fs_p32_causal` the shipped one (v64b's
# serializes its wgmmas, C7519). Carry: .anchors .gpu/v64
cd "$(dirname "$0")/../../.."
L=.gpu/v64
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum $L/*.so | tee -a "$OUT/gpu.txt"
common="--side-by-side --direction bwd --hdims 64 --causal 0,1 --public-fa3 .anchors/fa3"
run() {  # name this dtype
  local s=$SECONDS
  FA3_LIBRARY=$PWD/$L/libfa3_$2.so PYTHONUNBUFFERED=1 timeout --signal=KILL 200 \
    python3 bench/compare.py $common --dtype $3 --seqlens ${SEQLENS:-2048,4096,8192,16384} \
    --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/$L/libfa3_ship.so" --rounds ${ROUNDS:-10} \
    --csv "$OUT/$1.csv" > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? $((SECONDS - s)) s"; grep -E '^\| d64 \||^\| d64 causal \||this/prev, all|this/public, all|FAIL' "$OUT/$1.log" | head -12
}
run b_bf16 b bf16
run a_bf16 a bf16
run b_fp16 b fp16
run a_fp16 a fp16
