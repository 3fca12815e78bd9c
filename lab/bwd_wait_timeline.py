#!/usr/bin/env python3
"""Where the deterministic backward's dQ writer waits, from the diagnostic build of
lab/bwd_wait_timeline.patch (docs/perf-history.md v40).

Build it: `git apply lab/bwd_wait_timeline.patch`, then compile the kernels to look at with
-DFA3_WAIT_TIMELINE=1 (e.g. the d128 causal picks: put their cubins in build/cubin, `make`),
keep build/libfa3.so aside and undo the patch. Its kernels write 5 int64 per tile over O's
row n_block * block_n of (batch, kv_head): the tile's start and end (%globaltimer, ns), the
dQ writer's time in its counter waits, the SM and the K/V block (so O is garbage after a
call: never a release build). Then, on the GPU:

    FA3_LIBRARY=/path/to/that/libfa3.so python3 lab/bwd_wait_timeline.py [head_dim]

For each length it runs the deterministic causal backward a few times (O restored before
each call, as the preprocess reads it) and prints the share of the writer's time spent
waiting, per K/V block the median tile time, wait and start, and each SM's idle time at the
grid's end (the tail).
"""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import fa3  # noqa: E402


def stamps(head_dim: int, seqlen: int) -> list:
    batch, heads = 16384 // seqlen, 2048 // head_dim
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    out, lse = fa3.forward(q, k, v, causal=True, return_lse=True)[:2]
    keep, dout = out.clone(), torch.randn_like(out)
    for _ in range(5):
        out.copy_(keep)
        fa3.backward(q, k, v, out, dout, lse, causal=True, deterministic=True)
    torch.cuda.synchronize()
    # block_n is 128 for d64 and d128 (80 at d256: pass its rows instead).
    return [out[b, n * 128, h, :20].contiguous().view(torch.int64).tolist()
            for b in range(batch) for h in range(heads) for n in range(seqlen // 128)]


def report(name: str, rows: list) -> None:
    t0, t1 = min(r[0] for r in rows), max(r[1] for r in rows)
    busy, waits = sum(r[1] - r[0] for r in rows), sum(r[2] for r in rows)
    print(f"{name}: span {(t1 - t0) / 1e3:.0f} us; the writer waits {waits / busy:.3f} of its "
          f"tiles' time")
    by_block: dict = {}
    for r in rows:
        by_block.setdefault(r[4], []).append(r)
    blocks = sorted(by_block)
    for n in blocks[::max(1, len(blocks) // 8)]:
        rs = by_block[n]
        print(f"   K/V block {n:3d}: tile {statistics.median(r[1] - r[0] for r in rs) / 1e3:6.1f} us,"
              f" waits {statistics.median(r[2] for r in rs) / 1e3:5.1f} us,"
              f" start {statistics.median(r[0] - t0 for r in rs) / 1e3:6.0f} us")
    by_sm: dict = {}
    for r in rows:
        by_sm.setdefault(r[3], []).append(r[1])
    idle = [(t1 - max(ends)) / 1e3 for ends in by_sm.values()]
    print(f"   SMs idle at the end: median {statistics.median(idle):.0f} us, "
          f"max {max(idle):.0f} us")


if __name__ == "__main__":
    head_dim = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    for seqlen in (2048, 8192):
        report(f"d{head_dim} causal {seqlen}, deterministic", stamps(head_dim, seqlen))
