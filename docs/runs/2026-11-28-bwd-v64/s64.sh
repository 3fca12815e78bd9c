#!/bin/bash
# session 64, v64a: dS^T = P^T (dP^T - D_i) in 16-bit pairs (bwd_ds_packed: dP^T - D_i in
# fp32, converted, times the packed P^T by mul.rn.bf16x2 / f16x2), P^T packed as soon as it is
# computed. Correctness (the backward's GPU tests against float64), the main loop's
# instruction mix old / new, then compare.py (fp32 check on) this build / the shipped
# library (.gpu/v64/libfa3_ship.so, commit 2721a09) / the public FA3, bf16 and fp16.
# Carry: .anchors .gpu/v64 build/libfa3.so build/fa3_tests build/libfakecuda.so
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
md5sum build/libfa3.so .gpu/v64/libfa3_ship.so | tee -a "$OUT/gpu.txt"
s=$SECONDS
timeout --signal=KILL 300 build/fa3_tests '[gpu][backward]~[large]' > "$OUT/tests.log" 2>&1
echo "tests rc=$? $((SECONDS - s)) s"; tail -3 "$OUT/tests.log"
for v in ship new; do
  for c in .gpu/v64/sass/$v/*.cubin; do
    echo "== $v $(basename $c .cubin)"
    cuobjdump -sass $c | grep -oE '^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+' | \
      awk '{print $2}' | sed -E 's/\..*//' | sort | uniq -c | sort -rn | \
      awk '$2 ~ /^(FFMA|FMUL|FADD|MUFU|F2FP|HMUL2|HFMA2|HGMMA|LDS|STS|FSEL|ISETP)$/' | tr '\n' ' '; echo
  done
done
common="--side-by-side --direction bwd --hdims 64,128 --causal 0,1 --public-fa3 .anchors/fa3"
for dt in bf16 fp16; do
  s=$SECONDS
  FA3_LIBRARY=$PWD/build/libfa3.so PYTHONUNBUFFERED=1 timeout --signal=KILL 200 \
    python3 bench/compare.py $common --dtype $dt --seqlens ${SEQLENS:-2048,4096,8192,16384} \
    --systems fa3,fa3-prev,fa3-public --prev-lib "$PWD/.gpu/v64/libfa3_ship.so" --rounds ${ROUNDS:-8} \
    --csv "$OUT/ab_$dt.csv" > "$OUT/ab_$dt.log" 2>&1
  echo "ab_$dt rc=$? $((SECONDS - s)) s"; grep -E '^\| d|this/prev, all|this/public, all|FAIL|over' "$OUT/ab_$dt.log" | head -30
done
