#!/usr/bin/env python3
"""One row per kernel and shape of gpu-check's ncu-l2 log.

Cycles at ncu's locked clock compare kernels without the power cap: at the cap the energy per
flop sets the clock, and a kernel can win in cycles and lose in time (measured on an H100:
d128 causal 16k took 1.2% fewer cycles than non-causal 8k with the same flops, and ran 1.3%
slower at 700 W).

Columns: elapsed cycles at ncu's locked clock (gpc__cycles_elapsed.max), the tensor pipe's
active share, L2 sector reads for the SMs (lts__t_sectors_srcunit_tex_op_read) next to the
sectors the SMs received (l1tex__m_xbar2l1tex_read_sectors), DRAM bytes read and executed
instructions.

usage: tools/ncu_l2_table.py gpu-out/ncu-l2.log
"""
import re
import sys

METRIC = re.compile(r"\s+(\S+)\s+(\S+)\s+([\d,.]+)\s*$")


def rows_of(lines):
    rows = []
    for line in lines:
        if line.startswith("### "):
            name, *shape = line[4:].split()
            rows.append({"kernel": name, "shape": " ".join(shape)})
        elif rows:
            m = METRIC.match(line)
            if m:
                value = float(m.group(3).replace(",", ""))
                if m.group(2) == "Gbyte":  # ncu scales bytes; keep MB throughout
                    value *= 1000
                rows[-1][m.group(1)] = value
    return rows


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__.strip().splitlines()[-1])
    with open(argv[0]) as f:
        rows = rows_of(f)
    if not rows:
        sys.exit(f"{argv[0]}: no '### kernel shape' sections")
    print(f"{'kernel':72s} {'shape':44s} {'cycles':>11s} {'tensor%':>8s} {'L2 rd M':>8s} "
          f"{'recv M':>8s} {'DRAM MB':>8s} {'inst M':>8s}")
    for r in rows:
        print(f"{r['kernel']:72s} {r['shape']:44s} "
              f"{r.get('gpc__cycles_elapsed.max', 0):>11,.0f} "
              f"{r.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', 0):>8.2f} "
              f"{r.get('lts__t_sectors_srcunit_tex_op_read.sum', 0) / 1e6:>8.1f} "
              f"{r.get('l1tex__m_xbar2l1tex_read_sectors.sum', 0) / 1e6:>8.1f} "
              f"{r.get('dram__bytes_read.sum', 0):>8.1f} "
              f"{r.get('sm__inst_executed.sum', 0) / 1e6:>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
