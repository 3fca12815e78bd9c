#!/bin/bash
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
timeout 500 ncu --metrics $M --csv --kernel-name-base demangled -k regex:'Bwd|fa3_bwd' python3 .prev/ncu16.py > $OUT/ncu.csv 2> $OUT/ncu.err
echo rc $?; tail -3 $OUT/ncu.err
python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, mi, vi, ui = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
idi = hdr.index("ID"); gi = hdr.index("Grid Size")
per = collections.OrderedDict()
for r in rows:
    per.setdefault((r[idi], r[ki][:40] + ".." + r[ki][-40:], r[gi]), {})[r[mi]] = r[vi]
short = {"gpu__time_duration.sum": "ns", "dram__bytes_read.sum": "dramR", "dram__bytes_write.sum": "dramW",
         "lts__t_bytes.sum": "L2B", "lts__t_sector_hit_rate.pct": "L2hit%", "sm__inst_executed.sum": "inst",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed": "tc%", "sm__cycles_elapsed.avg.per_second": "clk"}
for (i, k, g), m in per.items():
    print(i, k, g, " | ".join(f"{short.get(n, n)} {v}" for n, v in m.items()))
PY
