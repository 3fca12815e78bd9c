#!/bin/bash
# ptxas_level_ab.sh VARIANT...: each variant library (.prev/libfa3_VARIANT.so: the production
# backward cubins compiled with other ptxas options) as fa3 against the shipped one
# (.prev/libfa3_v40.so, fa3-prev) and the public FA3, bench/compare.py side by side, bf16,
# d64 / d128 / d256, causal and not, 2k-16k, 5 rounds; then (TESTS=1) the first variant's
# backward GPU tests. Ran from the checkout's root with .prev/ and .anchors/ carried.
set -u
for v in "$@"; do
  FA3_LIBRARY=$PWD/.prev/libfa3_$v.so PYTHONUNBUFFERED=1 timeout 300 python3 bench/compare.py \
    --side-by-side --direction bwd --dtype ${DTYPE:-bf16} --hdims ${HDIMS:-64,128,256} --causal 1,0 \
    --seqlens ${SEQLENS:-2048,4096,8192,16384} --systems fa3,fa3-prev,fa3-public \
    --prev-lib $PWD/.prev/libfa3_v40.so --public-fa3 .anchors/fa3 --rounds ${ROUNDS:-5} \
    --csv $OUT/${v}_${DTYPE:-bf16}.csv > $OUT/${v}_${DTYPE:-bf16}.log 2>&1
  echo "== $v rc $?"
  python3 - "$OUT/${v}_${DTYPE:-bf16}.csv" <<'PY'
import csv, sys, collections, math
rows = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    rows[(int(r['head_dim']), int(r['causal']), int(r['seqlen']))][r['system']] = r
g = []
for key in sorted(rows):
    t = {k: float(v['median_ms']) for k, v in rows[key].items()}
    st = ",".join(sorted(set(v['status'] for v in rows[key].values())))
    g.append(t['fa3-prev'] / t['fa3'])
    print(f"d{key[0]} c{key[1]} S{key[2]:>5} this/prev {t['fa3-prev']/t['fa3']:.3f} this/public {t['fa3-public']/t['fa3']:.3f} prev/public {t['fa3-public']/t['fa3-prev']:.3f} {st}")
print(f"this/prev geometric mean {math.exp(sum(map(math.log, g)) / len(g)):.4f} over {len(g)}")
PY
done
if [ "${TESTS:-0}" = 1 ]; then
  timeout 240 .prev/fa3_tests_$1 '[gpu][backward]~[large]' > $OUT/tests_$1.log 2>&1
  echo "== tests rc $?"; tail -3 $OUT/tests_$1.log
fi
