#!/usr/bin/env python3
"""Opcode histogram of two kernels' step loops from ncu source pages (gpu-check's ncu-bwd).

The loop is the set of instructions executed COUNT times (a consumer warp's step: steps x 8
warps). usage: loop_opcodes.py A.csv.gz COUNT_A B.csv.gz COUNT_B  (run from the repo root)
e.g. ncu_source_d64_causal_8k_fa3.csv.gz 1064960 ncu_source_d64_causal_8k_public.csv.gz 1032192
"""
import collections
import sys

sys.path.insert(0, "tools")
import ncu_source_blocks as m  # noqa: E402


def loop(path, count):
    ops, samples, n = collections.Counter(), collections.Counter(), 0
    for _, src, s, e in m.read_instructions(path):
        if e != count:
            continue
        t = src.split()
        op = (t[1] if t[0].startswith("@") else t[0]).split(".")[0]
        ops[op] += 1
        samples[op] += s
        n += 1
    return n, ops, samples


n1, o1, s1 = loop(sys.argv[1], int(sys.argv[2]))
n2, o2, s2 = loop(sys.argv[3], int(sys.argv[4]))
t1, t2 = sum(s1.values()), sum(s2.values())
print(f"loop instructions {n1} / {n2}; samples {t1} / {t2}")
print(f"{'op':12s} {'A':>5s} {'B':>5s}   {'A %samples':>10s} {'B %samples':>10s}")
for op in sorted(set(o1) | set(o2), key=lambda k: -(o1[k] + o2[k])):
    print(f"{op:12s} {o1[op]:5d} {o2[op]:5d}   {100 * s1[op] / t1:10.1f} {100 * s2[op] / t2:10.1f}")
