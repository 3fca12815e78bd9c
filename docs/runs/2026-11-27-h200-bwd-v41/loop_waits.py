#!/usr/bin/env python3
"""A step loop's GEMM issues, waits and barriers in program order, with each one's share of
the loop's warp samples and the share since the previous one listed (ncu source page).

usage: loop_waits.py SOURCE.csv.gz COUNT  (run from the repo root; COUNT as in loop_opcodes.py)
"""
import sys

sys.path.insert(0, "tools")
import ncu_source_blocks as m  # noqa: E402

KEYS = ("HGMMA", "WARPGROUP", "BAR", "SYNCS", "FENCE", "MEMBAR", "S2R", "BRA")
ins = [x for x in m.read_instructions(sys.argv[1]) if x[3] == int(sys.argv[2])]
total = sum(x[2] for x in ins)
run = 0
for i, (address, src, s, _) in enumerate(ins):
    t = src.split()
    op = t[1] if t[0].startswith("@") else t[0]
    run += s
    if op.startswith(KEYS) or s > 0.01 * total:
        print(f"{i:4d} {100 * s / total:5.1f}% (since last {100 * run / total:5.1f}%)  {src[:72]}")
        run = 0
