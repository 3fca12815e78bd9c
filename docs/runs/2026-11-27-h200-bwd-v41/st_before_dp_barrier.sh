#!/bin/bash
# A named barrier of both consumer warpgroups between the S^T and dP^T GEMM issues (sb) against v40.
cd "$(dirname "$0")/.."
M=gpu__time_duration.sum,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for lib in v40 sb; do
  FA3_LIBRARY=$PWD/.prev/libfa3_$lib.so timeout 120 ncu --metrics $M --csv -k regex:'dqq_pt_causal$' \
    python3 .gpu/ncu_fa3.py > $OUT/ncu_sb_$lib.csv 2>/dev/null
  echo "== ncu $lib"; grep -E 'inst_executed|time_duration|pct_of_peak' $OUT/ncu_sb_$lib.csv | tail -3 | awk -F'","' '{print $(NF-2), $NF}'
done
FA3_LIBRARY=$PWD/.prev/libfa3_sb.so PYTHONUNBUFFERED=1 timeout 300 python3 bench/compare.py \
  --side-by-side --direction bwd --dtype bf16 --hdims 64,128 --causal 1,0 \
  --seqlens 2048,4096,8192,16384 --systems fa3,fa3-prev,fa3-public \
  --prev-lib $PWD/.prev/libfa3_v40.so --public-fa3 .anchors/fa3 --rounds 5 --csv $OUT/sb_bf16.csv \
  > $OUT/sb_bf16.log 2>&1
echo "== compare rc $?"
python3 - "$OUT/sb_bf16.csv" <<'PY'
import csv, sys, collections
rows = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    rows[(int(r['head_dim']), int(r['causal']), int(r['seqlen']))][r['system']] = r
for key in sorted(rows):
    t = {k: float(v['median_ms']) for k, v in rows[key].items()}
    st = ",".join(sorted(set(v['status'] for v in rows[key].values())))
    print(f"d{key[0]} c{key[1]} S{key[2]:>5} this/prev {t['fa3-prev']/t['fa3']:.3f} this/public {t['fa3-public']/t['fa3']:.3f} prev/public {t['fa3-public']/t['fa3-prev']:.3f} {st}")
PY
timeout 200 .prev/fa3_tests_sb '[gpu][backward]~[large]' 2>&1 | tail -2
