#!/bin/bash
# L2 section budget probe: libfa3_l2env reads FA3_LAB_L2_MB (the shipped 40).
M=gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
for mb in 40 10; do
  FA3_LAB_L2_MB=$mb FA3_LIBRARY=$PWD/.prev/libfa3_l2env.so timeout 100 ncu --metrics $M --csv -k regex:fa3_bwd python3 .prev/ncu_o.py > $OUT/ncu_$mb.csv 2>/dev/null
  echo "== ncu MB=$mb"; python3 - "$OUT/ncu_$mb.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, mi, vi = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
idi = hdr.index("ID")
per = collections.OrderedDict()
for r in rows:
    per.setdefault((r[idi], r[ki]), {})[r[mi].split("__")[1].split(".")[0]] = r[vi]
for (i, k), m in per.items():
    if k.endswith(("_pre", "_post")): continue
    print(i, k[8:], " | ".join(f"{n} {v}" for n, v in m.items()))
PY
done
for mb in 10 20; do
  echo "==== FA3_LAB_L2_MB=$mb"
  FA3_LAB_L2_MB=$mb RUNS="d64c$mb:l2env:base:bf16:64:1:4096,8192,16384 d128c$mb:l2env:base:bf16:128:1:4096,8192,16384" ROUNDS=4 TMO=150 .prev/k_ab.sh
done
