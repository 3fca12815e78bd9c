#!/bin/bash
# variant_ab.sh VARIANT: a lab variant's library (.prev/libfa3_VARIANT.so, its test binary
# .prev/fa3_tests_VARIANT) against the shipped one (.prev/libfa3_v40.so): ncu on the bf16 d64
# causal 8k main kernel of both, compare.py bf16 d64 and d128 2k-16k with the public FA3,
# then the backward GPU tests. VARIANT: la (v41f'), df (v41g'; also dumps the SASS of both
# d64 causal cubins, .gpu/m0_d64c.cubin and .gpu/df_d64c.cubin), sb (v41h').
# Ran from the checkout's ignored .gpu/ folder (see README.md).
set -u
v=$1
cd "$(dirname "$0")/.."
if [ "$v" = df ]; then
  for c in m0 df; do cuobjdump -sass .gpu/${c}_d64c.cubin | gzip > $OUT/sass_$c.txt.gz; done
fi
M=gpu__time_duration.sum,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for lib in v40 $v; do
  FA3_LIBRARY=$PWD/.prev/libfa3_$lib.so timeout 120 ncu --metrics $M --csv -k regex:'dqq_pt_causal$' \
    python3 .gpu/ncu_fa3.py > $OUT/ncu_${v}_$lib.csv 2>/dev/null
  echo "== ncu $lib"; grep -E 'inst_executed|time_duration|pct_of_peak' $OUT/ncu_${v}_$lib.csv | tail -3 | awk -F'","' '{print $(NF-2), $NF}'
done
FA3_LIBRARY=$PWD/.prev/libfa3_$v.so PYTHONUNBUFFERED=1 timeout 300 python3 bench/compare.py \
  --side-by-side --direction bwd --dtype bf16 --hdims 64,128 --causal 1,0 \
  --seqlens 2048,4096,8192,16384 --systems fa3,fa3-prev,fa3-public \
  --prev-lib $PWD/.prev/libfa3_v40.so --public-fa3 .anchors/fa3 --rounds 5 --csv $OUT/${v}_bf16.csv \
  > $OUT/${v}_bf16.log 2>&1
echo "== compare rc $?"
python3 - "$OUT/${v}_bf16.csv" <<'PY'
import csv, sys, collections
rows = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    rows[(int(r['head_dim']), int(r['causal']), int(r['seqlen']))][r['system']] = r
for key in sorted(rows):
    t = {k: float(v['median_ms']) for k, v in rows[key].items()}
    st = ",".join(sorted(set(v['status'] for v in rows[key].values())))
    print(f"d{key[0]} c{key[1]} S{key[2]:>5} this/prev {t['fa3-prev']/t['fa3']:.3f} this/public {t['fa3-public']/t['fa3']:.3f} prev/public {t['fa3-public']/t['fa3-prev']:.3f} {st}")
PY
timeout 200 .prev/fa3_tests_$v '[gpu][backward]~[large]' 2>&1 | tail -2
