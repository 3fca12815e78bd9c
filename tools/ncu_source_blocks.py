#!/usr/bin/env python3
"""Sums an ncu source page (gpu-check's ncu-source step) per straight-line block.

Consecutive SASS instructions executed the same number of times form one block: the
mainloop, the masked step, the epilogue, a producer's wait loop. For each block, largest
first: its address range, length, how often it ran, its share of the warp-state samples
(where the time goes) and of the executed warp instructions (where the issue slots go),
and how many HGMMA / MUFU / FSEL / stores it holds. With --reasons, first the kernel's
samples by stall reason (ncu's stall_* columns): e.g. stall_no_inst, the warps waiting for an
instruction fetch (docs/perf-history.md v74).

usage: tools/ncu_source_blocks.py source_KERNEL.csv.gz [--top N] [--reasons]
"""
import argparse
import csv
import gzip
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def read_page(path):
    """The source page's column index, its instruction rows, and (address, source, samples,
    executed) of each of them."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if SAMPLES in r)
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    instruction_rows, instructions = [], []
    for r in rows[header_at + 1:]:
        try:
            instructions.append((int(r[0], 16), r[col["Source"]].strip(), int(r[col[SAMPLES]]),
                                 int(r[col[EXECUTED]])))
        except (ValueError, IndexError):
            continue  # not an instruction row
        instruction_rows.append(r)
    return col, instruction_rows, instructions


def read_instructions(path):
    return read_page(path)[2]


def stall_reasons(col, rows):
    """The kernel's warp-state samples of read_page's rows summed per stall reason, largest
    first."""
    names = [n for n in col if n.startswith("stall_") and "(Not Issued)" not in n]
    sums = {n: sum(int(r[col[n]] or 0) for r in rows) for n in names}
    return sorted(sums.items(), key=lambda item: -item[1])


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
    parser.add_argument("--reasons", action="store_true",
                        help="print the kernel's samples by stall reason first")
    args = parser.parse_args(argv)
    col, rows, instructions = read_page(args.csv)
    if not instructions:
        sys.exit(f"{args.csv}: no instruction rows")
    base = instructions[0][0]
    total_samples = sum(i[2] for i in instructions) or 1
    total_executed = sum(i[3] for i in instructions) or 1
    print(f"{len(instructions)} instructions, {total_samples} samples, "
          f"{total_executed} warp instructions executed")
    if args.reasons:
        for name, samples in stall_reasons(col, rows):
            if samples:
                print(f"  {name:24s} {samples:9d}  {100 * samples / total_samples:5.2f}%")
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
