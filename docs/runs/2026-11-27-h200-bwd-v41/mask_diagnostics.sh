#!/bin/bash
# d64 causal (bf16): the shipped mask / no mask (nm, timing only) / the mask behind a
# warpgroup-uniform branch (mb).
cd "$(dirname "$0")/.."
M=gpu__time_duration.sum,sm__inst_executed.sum,smsp__cycles_active.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for lib in v40 nm mb; do
  FA3_LIBRARY=$PWD/.prev/libfa3_$lib.so timeout 120 ncu --metrics $M --csv -k regex:'dqq_pt_causal$' \
    python3 .gpu/ncu_fa3.py > $OUT/ncu_$lib.csv 2>/dev/null
  echo "== ncu $lib"; grep -E 'inst_executed|time_duration|pct_of_peak' $OUT/ncu_$lib.csv | tail -3 | awk -F'","' '{print $(NF-2), $NF}'
done
for lib in mb nm; do
  FA3_LIBRARY=$PWD/.prev/libfa3_$lib.so PYTHONUNBUFFERED=1 timeout 200 python3 bench/compare.py \
    --side-by-side --direction bwd --dtype bf16 --hdims 64 --causal 1 \
    --seqlens 2048,4096,8192,16384 --systems fa3,fa3-prev,fa3-public \
    --prev-lib $PWD/.prev/libfa3_v40.so --public-fa3 .anchors/fa3 --rounds 5 --csv $OUT/mask_$lib.csv \
    > $OUT/mask_$lib.log 2>&1
  echo "== $lib rc $?"
  python3 - "$OUT/mask_$lib.csv" <<'PY'
import csv, sys, collections
rows = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    rows[int(r['seqlen'])][r['system']] = r
for S in sorted(rows):
    t = {k: float(v['median_ms']) for k, v in rows[S].items()}
    st = {k: v['status'] for k, v in rows[S].items()}
    print(f"S{S:>5} this/prev {t['fa3-prev']/t['fa3']:.3f} this/public {t['fa3-public']/t['fa3']:.3f} prev/public {t['fa3-public']/t['fa3-prev']:.3f} {st}")
PY
done
timeout 200 .prev/fa3_tests_mb '[gpu][backward]~[large]' 2>&1 | tail -3
