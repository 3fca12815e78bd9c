#!/usr/bin/env python3
"""Calls one system of compare.py on one paper-grid shape a few times, for a profiler.

    ncu --launch-skip ... python3 bench/profile_call.py --system cudnn --hdim 64 --seqlen 1024 --causal 1

The same inputs and the same calls as compare.py's timing (one input set, rotated calls are
not needed for a profile), so ncu sees the kernels each system launches for that cell: how
many, their names (cuDNN's encode its tile shape), grid, registers and instruction mix.
"""

from __future__ import annotations

import argparse
import sys

import torch

from compare import DTYPES, Shape, all_systems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", required=True, choices=sorted(all_systems()))
    parser.add_argument("--hdim", type=int, required=True)
    parser.add_argument("--seqlen", type=int, required=True)
    parser.add_argument("--causal", type=int, choices=(0, 1), default=0)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--calls", type=int, default=4)
    args = parser.parse_args()

    shape = Shape(args.seqlen, args.hdim, bool(args.causal))
    dims = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)
    torch.manual_seed(0)
    q, k, v = (torch.randn(dims, dtype=DTYPES[args.dtype], device="cuda") for _ in range(3))
    system = all_systems()[args.system]
    for _ in range(args.calls):
        system.run(q, k, v, shape.causal)
    torch.cuda.synchronize()
    print(f"{args.system}: {args.calls} calls of B{shape.batch} H{shape.heads} "
          f"S{shape.seqlen} d{shape.head_dim} causal={shape.causal} {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
