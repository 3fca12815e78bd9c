#!/usr/bin/env python3
"""Where a backward CTA's time goes, from the diagnostic build of lab/bwd_timeline.patch.

Build it: `git apply lab/bwd_timeline.patch`, set FA3_BWD_TIMELINE to 1 in
src/kernels/bwd_kernel.cuh, `make`, copy build/libfa3.so aside, and undo the patch (its
kernels write SM cycle stamps over dV: never a release build). Then, on the GPU:

    FA3_LIBRARY=/path/to/that/libfa3.so python3 lab/bwd_timeline.py

For each paper-grid cell below it runs fa3.backward a few times, reads every CTA's stamps
(the first 40 dV values of its first key: 10 int64) and prints the medians, in cycles and in
steps of the main loop: start -> K/V in, -> the first Q/dO in, -> the first S^T done; the
epilogue's first barrier, its staging of dK and dV, its TMA store's read; and the gap from a
CTA's end to the next CTA's start on the same SM (teardown, launch, barrier set-up). The
loop's share of the SMs' time is what a persistent kernel could raise.
"""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import fa3  # noqa: E402

CELLS = ((128, False, 2048), (128, True, 2048), (64, False, 2048), (64, True, 2048),
         (128, True, 8192), (64, True, 16384))


def stamps(head_dim: int, causal: bool, seqlen: int) -> list:
    batch, heads = 16384 // seqlen, 2048 // head_dim
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    out, lse = fa3.forward(q, k, v, causal=causal, return_lse=True)[:2]
    dout = torch.randn_like(out)
    for _ in range(6):
        grads = fa3.backward(q, k, v, out, dout, lse, causal=causal)
    torch.cuda.synchronize()
    dv = grads[2]
    return [dv[b, n * 128, h, :40].contiguous().view(torch.int64).tolist()
            for b in range(batch) for h in range(heads) for n in range((seqlen + 127) // 128)]


def report(name: str, rows: list) -> None:
    by_sm: dict = {}
    for r in rows:
        by_sm.setdefault(r[8] >> 32, []).append(r)
    gaps, per_step = [], []
    for ctas in by_sm.values():
        ctas.sort(key=lambda r: r[0])
        gaps += [b[0] - a[7] for a, b in zip(ctas, ctas[1:])]
    per_step = [(r[4] - r[3]) / ((r[8] & 0xFFFFFFFF) - 1) for r in rows if (r[8] & 0xFFFFFFFF) > 1]
    step = statistics.median(per_step)
    parts = {"start -> K/V in": [r[1] - r[0] for r in rows],
             "K/V -> Q0 in": [r[2] - r[1] for r in rows],
             "Q0 -> S0 done": [r[3] - r[2] for r in rows],
             "loop end -> barrier": [r[5] - r[4] for r in rows],
             "dK, dV staged": [r[6] - r[5] for r in rows],
             "TMA store read": [r[7] - r[6] for r in rows],
             "gap to next CTA": gaps}
    print(f"{name}: {len(rows)} CTAs on {len(by_sm)} SMs, {step:.0f} cycles a step")
    for label, values in parts.items():
        m = statistics.median(values)
        print(f"   {label:20s} {m:7.0f} cycles = {m / step:4.2f} steps")
    busy = sum(r[4] - r[2] for r in rows)
    total = sum(r[7] - r[0] for r in rows) + sum(gaps)
    print(f"   the loop's share of the SMs' time: {busy / total:.3f}")


if __name__ == "__main__":
    for head_dim, causal, seqlen in CELLS:
        report(f"d{head_dim}{' causal' if causal else ''} {seqlen}", stamps(head_dim, causal, seqlen))
