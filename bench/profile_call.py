#!/usr/bin/env python3
"""Calls one system of compare.py on one paper-grid shape a few times, for a profiler.

    ncu --launch-skip ... python3 bench/profile_call.py --system cudnn --hdim 64 --seqlen 1024 --causal 1
    ncu ... python3 bench/profile_call.py --system fa3-public --public-fa3 .anchors/fa3 \
        --direction bwd --hdim 128 --seqlen 8192 --causal 1

The same inputs and the same calls as compare.py's timing (one input set, rotated calls are
not needed for a profile), so ncu sees the kernels each system launches for that cell: how
many, their names (cuDNN's encode its tile shape), grid, registers and instruction mix.
With --direction bwd the forward runs once first, then the backward `--calls` times (as
compare.py times it: dO fixed, the forward outside).
"""

from __future__ import annotations

import argparse
import sys

import torch

import compare
from compare import DTYPES, Shape, all_systems


def systems(public_fa3: str) -> dict:
    """all_systems(), plus fa3-det, and fa3-public when --public-fa3 names its directory."""
    found = all_systems()
    found["fa3-det"] = compare.fa3_det_system()
    if public_fa3:
        why = compare.import_public_fa3(public_fa3)
        if why:
            raise SystemExit(f"the public FA3 in {public_fa3} cannot be imported: {why}")
        found["fa3-public"] = compare.public_fa3_system()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", required=True,
                        choices=sorted(list(all_systems()) + ["fa3-det", "fa3-public"]))
    parser.add_argument("--public-fa3", default="",
                        help="directory of the public FA3 (needed for --system fa3-public)")
    parser.add_argument("--direction", choices=("fwd", "bwd"), default="fwd")
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
    system = systems(args.public_fa3)[args.system]
    if args.direction == "fwd":
        for _ in range(args.calls):
            system.run(q, k, v, shape.causal)
    else:
        if system.prepare is None or system.backward is None:
            raise SystemExit(f"{args.system} has no backward")
        dout = torch.randn_like(q)
        forward = system.guarded(system.prepare, q, k, v, shape.causal)
        for _ in range(args.calls):
            system.guarded(system.backward, forward, dout)
    torch.cuda.synchronize()
    print(f"{args.system} {args.direction}: {args.calls} calls of B{shape.batch} H{shape.heads} "
          f"S{shape.seqlen} d{shape.head_dim} causal={shape.causal} {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
