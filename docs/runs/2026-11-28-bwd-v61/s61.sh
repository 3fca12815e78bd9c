#!/bin/bash
# session 61, v61a' (diagnostic): the one-way proxy fence. Every fence_proxy_async_shared of the
# backward kernels (the dQ part's and dS^T's staging stores before the bulk reduce-add's and
# wgmma's async-proxy reads) as fence.proxy.async::generic.release.sync_restrict::shared::cta
# .cluster (FA3_DIAG_RELEASE_PROXY_FENCE=1) instead of the two-way fence.proxy.async.shared::cta.
#   1. SASS: what each form assembles to (a tiny kernel, two production cubins, both forms)
#   2. the rf library (all 16 backward cubins with the one-way fence) against the shipped
#      library and the public FA3, gradients checked (verdict on), bf16 then fp16
# Carry: .anchors .gpu/v61
cd "$(dirname "$0")/../../.."
L=.gpu/v61
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum $L/*.so | tee -a "$OUT/gpu.txt"
{
  for c in $L/sass/*.cubin; do
    echo "== $c: $(cuobjdump -sass $c | grep -c -E '^\s+/\*[0-9a-f]{4}\*/') instructions"
    cuobjdump -sass $c | grep -E 'FENCE|MEMBAR|CCTL' | sed 's#/\* 0x[0-9a-f]* \*/##' | sort | uniq -c
  done
  for k in $L/sass/*.ship.cubin; do
    r=${k%.ship.cubin}.rf.cubin
    echo "== diff $k $r"
    diff <(cuobjdump -sass $k | sed 's#/\*[0-9a-f]*\*/##; s#/\* 0x[0-9a-f]* \*/##' | grep -v '^\s*$') \
         <(cuobjdump -sass $r | sed 's#/\*[0-9a-f]*\*/##; s#/\* 0x[0-9a-f]* \*/##' | grep -v '^\s*$') | head -40
  done
} > "$OUT/sass.txt" 2>&1
cat "$OUT/sass.txt" | head -60
common="--side-by-side --direction bwd --hdims 64,128 --causal 0,1 --public-fa3 .anchors/fa3"
for dt in ${DTYPES:-bf16 fp16}; do
  s=$SECONDS
  FA3_LIBRARY=$PWD/$L/libfa3_rf.so PYTHONUNBUFFERED=1 timeout --signal=KILL 200 \
    python3 bench/compare.py $common --dtype $dt --seqlens ${SEQLENS:-2048,4096,8192,16384} \
    --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/$L/libfa3_ship.so" --rounds ${ROUNDS:-8} \
    --csv "$OUT/rf_vs_ship_$dt.csv" > "$OUT/rf_vs_ship_$dt.log" 2>&1
  echo "rf vs ship $dt rc=$? $((SECONDS - s)) s"; tail -20 "$OUT/rf_vs_ship_$dt.log"
done
