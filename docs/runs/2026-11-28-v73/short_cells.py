#!/usr/bin/env python3
"""The 1.05x target's short cells over every full side by side of the shipped library.

The library (libfa3.so md5 bfa618074888065130f6e3d12e72f6ea) has run the full backward side
by side (fa3, fa3-det, public FA3, cuDNN; 8 rounds; bench/compare.py) three times: v56 on an
H200 and an H100, v71 on an H200. This reads their CSVs (no GPU) and prints, for every cell
from 2k that is below 1.05x the public FA3 in at least one run, fa3 / public FA3 in each run.
Run from the repository root. Later runs of the same library are added as NAME=FOLDER
arguments (v75: short_cells.py "v75 H200=docs/runs/2026-11-28-v75/h200").
"""
import csv
import sys

RUNS = {
    "v56 H200": "docs/runs/2026-11-28-bwd-v56/h200_side_by_side",
    "v71 H200": "docs/runs/2026-11-28-v71/h200",
    "v56 H100": "docs/runs/2026-11-28-bwd-v56/h100_side_by_side",
}
RUNS.update(arg.split("=", 1) for arg in sys.argv[1:])
TARGET = 1.05

cells = {}
for run, folder in RUNS.items():
    for dtype in ("bf16", "fp16"):
        with open(f"{folder}/side_by_side_bwd_{dtype}.csv") as f:
            for row in csv.DictReader(f):
                if any(v != "ok" for c, v in row.items() if c.endswith("_status")):
                    raise SystemExit(f"{run} {dtype}: a system's gradients were not ok")
                key = (dtype, int(row["head_dim"]), int(row["causal"]), int(row["seqlen"]))
                cells.setdefault(key, {})[run] = (float(row["this_over_public"]),
                                                  float(row["fa3_over_cudnn"]))

from_2k = {k: v for k, v in cells.items() if k[3] >= 2048}
short = {k: v for k, v in from_2k.items() if any(r[0] < TARGET for r in v.values())}
print("| dtype | config | seqlen | " + " | ".join(RUNS) + " | below 1.05x in |")
print("|---|---|---|" + "---|" * len(RUNS) + "---|")
for (dtype, d, causal, s), v in sorted(short.items()):
    ratios = [v[r][0] for r in RUNS]
    below = sum(x < TARGET for x in ratios)
    name = f"d{d}" + (" causal" if causal else "")
    print(f"| {dtype} | {name} | {s // 1024}k | " + " | ".join(f"{x:.4f}" for x in ratios)
          + f" | {below} of {len(RUNS)} |")
print()
print(f"cells from 2k: {len(from_2k)} per run; below {TARGET}x in every run: "
      f"{sum(all(r[0] < TARGET for r in v.values()) for v in from_2k.values())}; "
      f"in at least one: {len(short)}")
print("lowest fa3 / public FA3 from 2k: %.3f" % min(r[0] for v in from_2k.values() for r in v.values()))
print("lowest at 1k: %.3f" % min(r[0] for k, v in cells.items() if k[3] == 1024 for r in v.values()))
print("lowest fa3 / cuDNN, any cell: %.3f" % min(r[1] for v in cells.values() for r in v.values()))
