#!/usr/bin/env python3
"""fa3's compare.py runs against the public FlashAttention-3 figures of ANCHORS.md.

ANCHORS.md holds the public FA3 and cuDNN forward TFLOPS (bf16) measured side by side on
this workplace's H100 and H200 on one day. Our runs see GPUs in other states (power, clock,
temperature: at the 700 W cap an H100 ran these kernels at 1.46-1.70 GHz, not its 1.98
GHz boost, and speed follows the energy per flop), so each cell is shown two ways:
- fa3 against the anchor's FA3 figure as it stands (the issue's target);
- fa3 / cuDNN of the same run against the anchor day's FA3 / cuDNN: how fa3 would compare
  with the public FA3 if cuDNN is taken as the yardstick of the GPU's state.
With several CSVs (runs of compare.py on one GPU), each cell shows the median over runs and
the range of fa3's TFLOPS.

    python3 bench/vs_anchors.py --anchors ../shared/ANCHORS.md run1.csv run2.csv
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from pathlib import Path

SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
# The headings of ANCHORS.md's forward tables: the H200 one, and the H100 one (whose
# forward rows start with "fwd ").
TABLES = {"H200": ("## Forward, bf16, NVIDIA H200", ""),
          "H100": ("## The same on an H100", "fwd ")}


def read_anchors(path: Path, gpu: str) -> dict[tuple[str, int], tuple[float, float]]:
    """(config, seqlen) -> (public FA3, cuDNN) TFLOPS, from the GPU's forward table."""
    heading, prefix = TABLES[gpu]
    anchors: dict[tuple[str, int], tuple[float, float]] = {}
    inside = False
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            inside = line.startswith(heading)
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not inside or len(cells) != len(SEQLENS) + 1 or not cells[0].startswith(prefix):
            continue
        config = cells[0][len(prefix):]
        if not re.fullmatch(r"d\d+( causal)?", config):
            continue
        for seqlen, cell in zip(SEQLENS, cells[1:]):
            fa3_public, cudnn = (float(x) for x in cell.split("/")[:2])
            anchors[(config, seqlen)] = (fa3_public, cudnn)
    if not anchors:
        raise SystemExit(f"{path}: no forward table for {gpu} found")
    return anchors


Runs = dict[tuple[str, int], list[tuple[float, float]]]


def read_runs(paths: list[Path]) -> tuple[str, str, Runs]:
    """The GPU, the dtype and, per (config, seqlen), one (fa3, cuDNN) TFLOPS pair per run."""
    runs: Runs = {}
    gpus, dtypes = set(), set()
    for path in paths:
        cells: dict[tuple[str, int], dict[str, float]] = {}
        with path.open() as handle:
            for row in csv.DictReader(handle):
                if row["status"] != "ok":
                    continue
                gpus.add(row["gpu"])
                dtypes.add(row["dtype"])
                config = f"d{row['head_dim']}" + (" causal" if row["causal"] == "1" else "")
                cells.setdefault((config, int(row["seqlen"])), {})[row["system"]] = \
                    float(row["tflops"])
        for key, systems in cells.items():
            if "fa3" in systems and "cudnn" in systems:
                runs.setdefault(key, []).append((systems["fa3"], systems["cudnn"]))
    if not runs:
        raise SystemExit("no cell of the CSVs has both an fa3 and a cuDNN time")
    if len(gpus) != 1 or len(dtypes) != 1:
        raise SystemExit(f"the CSVs mix GPUs {sorted(gpus)} or dtypes {sorted(dtypes)}")
    return gpus.pop(), dtypes.pop(), runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+", type=Path, help="compare.py --csv files of one GPU")
    parser.add_argument("--anchors", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "ANCHORS.md")
    parser.add_argument("--min-seqlen", type=int, default=2048,
                        help="the shortest length the target counts (default 2048)")
    args = parser.parse_args()
    if not args.anchors.is_file():
        parser.error(f"--anchors {args.anchors}: no such file")

    gpu_name, dtype, runs = read_runs(args.csv)
    gpu = "H200" if "H200" in gpu_name else "H100"
    anchors = read_anchors(args.anchors, gpu)
    print(f"{gpu_name}, {dtype}, {len(args.csv)} run(s), against ANCHORS.md's {gpu} bf16 "
          f"figures (public FA3 / cuDNN)")
    print("cell: fa3 median [range] vs public FA3 anchor, delta; cuDNN-normalized delta "
          "(fa3/cuDNN of the run against FA3/cuDNN of the anchor day); cuDNN vs its anchor")
    below = []
    for (config, seqlen), pairs in sorted(runs.items()):
        if seqlen < args.min_seqlen or (config, seqlen) not in anchors:
            continue
        public, cudnn_anchor = anchors[(config, seqlen)]
        fa3 = statistics.median(p[0] for p in pairs)
        ratio = statistics.median(p[0] / p[1] for p in pairs)
        cudnn = statistics.median(p[1] for p in pairs)
        delta = fa3 / public - 1
        normalized = ratio / (public / cudnn_anchor) - 1
        span = f"[{min(p[0] for p in pairs):.0f}-{max(p[0] for p in pairs):.0f}]"
        print(f"{config:<12} {seqlen:>6}  {fa3:6.1f} {span:<10} vs {public:5.0f}  {delta:+6.1%}"
              f"   normalized {normalized:+6.1%}   cuDNN {cudnn:5.0f} vs {cudnn_anchor:4.0f} "
              f"{cudnn / cudnn_anchor - 1:+6.1%}")
        if delta < 0:
            below.append(f"{config} {seqlen} ({delta:+.1%}, normalized {normalized:+.1%})")
    print(f"below the anchor from {args.min_seqlen}: " + ("; ".join(below) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
