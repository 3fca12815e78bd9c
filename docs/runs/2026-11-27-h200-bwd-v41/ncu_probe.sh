#!/bin/bash
cd "$(dirname "$0")/.."
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
timeout 500 ncu --metrics $M --csv --kernel-name-base demangled -k regex:'Bwd|fa3_bwd' python3 .gpu/ncu_probe.py > $OUT/ncu.csv 2> $OUT/ncu.err
echo rc $?
python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, mi, vi, ui = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
idi = hdr.index("ID")
per = collections.OrderedDict()
for r in rows:
    per.setdefault((r[idi], r[ki][:50] + r[ki][-60:]), {})[r[mi]] = (r[vi], r[ui])
for (i, k), m in per.items():
    print(i, k, " | ".join(f"{n.split('__')[1]} {v} {u}" for n, (v, u) in m.items()))
PY
