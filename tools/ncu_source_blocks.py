#!/usr/bin/env python3
"""Sums an ncu source page (gpu-check's ncu-source step) per straight-line block.

Consecutive SASS instructions executed the same number of times form one block: the
mainloop, the masked step, the epilogue, a producer's wait loop. For each block, largest
first: its address range, length, how often it ran, its share of the warp-state samples
(where the time goes) and of the executed warp instructions (where the issue slots go),
and how many HGMMA / MUFU / FSEL / stores it holds.

usage: tools/ncu_source_blocks.py source_KERNEL.csv.gz [--top N]
"""
import argparse
import csv
import gzip
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def read_instructions(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if SAMPLES in r)
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    out = []
    for r in rows[header_at + 1:]:
        try:
            out.append((int(r[0], 16), r[col["Source"]].strip(), int(r[col[SAMPLES]]),
                        int(r[col[EXECUTED]])))
        except (ValueError, IndexError):
            continue  # not an instruction row
    return out


def blocks_of(instructions):
    blocks = []
    for address, source, samples, executed in instructions:
        if blocks and blocks[-1]["executed"] == executed:
            b = blocks[-1]
        else:
            b = {"start": address, "executed": executed, "samples": 0, "sources": []}
            blocks.append(b)
        b["end"] = address
        b["samples"] += samples
        b["sources"].append(source)
    return blocks


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    instructions = read_instructions(args.csv)
    if not instructions:
        sys.exit(f"{args.csv}: no instruction rows")
    base = instructions[0][0]
    total_samples = sum(i[2] for i in instructions) or 1
    total_executed = sum(i[3] for i in instructions) or 1
    print(f"{len(instructions)} instructions, {total_samples} samples, "
          f"{total_executed} warp instructions executed")
    for b in sorted(blocks_of(instructions), key=lambda b: -b["samples"])[:args.top]:
        n = len(b["sources"])
        count = lambda *keys: sum(1 for s in b["sources"] if any(k in s for k in keys))
        print(f"+{b['start'] - base:#07x}..+{b['end'] - base:#07x}  {n:4d} instr x {b['executed']:9d}"
              f"  samples {100 * b['samples'] / total_samples:5.1f}%"
              f"  issued {100 * n * b['executed'] / total_executed:5.1f}%"
              f"  HGMMA {count('HGMMA'):2d} MUFU {count('MUFU'):3d} FSEL {count('FSEL'):3d}"
              f" stores {count('STS', 'STSM', 'UTMASTG'):2d}")


if __name__ == "__main__":
    main(sys.argv[1:])
