#!/bin/bash
FA3_LIBRARY=$PWD/.prev/libfa3_nd.so timeout 300 ncu --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --csv -k regex:'fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq(_causal)?$' python3 .prev/ws.py > $OUT/ws.csv 2> $OUT/ws.err
echo rc $?; wc -l $OUT/ws.csv
python3 - $OUT/ws.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, mi, vi, ui = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
per = collections.OrderedDict()
for r in rows:
    per.setdefault(r[mi], {})[r[ki]] = (r[vi], r[ui])
names = list(dict.fromkeys(r[ki] for r in rows))
print(" | ".join(n[-20:] for n in names))
for m, d in per.items():
    print(f"{m[:60]:60s}", " | ".join(f"{d.get(n, ('-',''))[0]:>14s}" for n in names), list(d.values())[0][1])
PY
