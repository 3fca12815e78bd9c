#!/bin/bash
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for lib in base oa ob; do
  echo "== $lib"
  FA3_LIBRARY=$PWD/.prev/libfa3_$lib.so timeout 150 ncu --metrics $M --csv -k regex:fa3_bwd python3 .prev/ncu_o.py > $OUT/ncu_$lib.csv 2> $OUT/ncu_$lib.err
  python3 - "$OUT/ncu_$lib.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, mi, vi = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
idi = hdr.index("ID"); gi = hdr.index("Grid Size")
per = collections.OrderedDict()
for r in rows:
    per.setdefault((r[idi], r[ki], r[gi]), {})[r[mi].split("__")[1].split(".")[0]] = r[vi]
for (i, k, g), m in per.items():
    if k.endswith(("_pre", "_post")): continue
    print(i, k[8:], g, " | ".join(f"{n} {v}" for n, v in m.items()))
PY
done
