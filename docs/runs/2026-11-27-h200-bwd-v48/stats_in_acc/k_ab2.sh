#!/bin/bash
# docs/runs/2026-11-27-h200-bwd-v44/k_ab.sh with each cell's max |difference| from float32 printed
# post_sms A/B: compare.py this vs prev (+ public), d64 causal etc.
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader
ab() {  # ab NAME THIS PREV DTYPE HDIMS CAUSAL SEQLENS
  FA3_LIBRARY=$PWD/.prev/libfa3_$2.so PYTHONUNBUFFERED=1 timeout ${TMO:-200} python3 bench/compare.py \
    --side-by-side --direction bwd --dtype $4 --hdims $5 --causal $6 \
    --seqlens $7 --systems fa3,fa3-prev,fa3-public \
    --prev-lib $PWD/.prev/libfa3_$3.so --public-fa3 .anchors/fa3 --rounds ${ROUNDS:-5} \
    --csv $OUT/$1.csv > $OUT/$1.log 2>&1
  echo "== $1 rc $? ($(date +%T))"
  python3 - "$OUT/$1.csv" <<'PY'
import csv, sys, collections, math
rows = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    rows[(int(r['head_dim']), int(r['causal']), int(r['seqlen']))][r['system']] = r
g = []
for key in sorted(rows):
    t = {k: float(v['median_ms']) for k, v in rows[key].items()}
    st = ",".join(sorted(set(v['status'] for v in rows[key].values())))
    g.append(t['fa3-prev'] / t['fa3'])
    dd = {k: v["max_abs_diff"] for k, v in rows[key].items()}; print(f"d{key[0]} c{key[1]} S{key[2]:>5} diff {dd.get('fa3')} / {dd.get('fa3-prev')} / {dd.get('fa3-public')} this/prev {t['fa3-prev']/t['fa3']:.3f} this/public {t['fa3-public']/t['fa3']:.3f} prev/public {t['fa3-public']/t['fa3-prev']:.3f} {st}")
print(f"this/prev geometric mean {math.exp(sum(map(math.log, g)) / len(g)):.4f} over {len(g)}")
PY
}
for spec in ${RUNS}; do
  IFS=: read name this prev dtype hd causal seqs <<< "$spec"
  ab $name $this $prev $dtype $hd $causal $seqs
done
