#!/usr/bin/env python3
"""Where a backward step's time goes, from the diagnostic build of lab/bwd_steps.patch.

Its kernels stamp SM cycles (clock64) at 8 points of steps 8-11 of every CTA, for thread 0 of
each consumer warpgroup, over dQ (the postprocess is off: dQ is garbage). Points: 0 the stage
is full, 1 S^T done, 2 dP^T done, 3 dS^T stored (before dV's GEMM), 4 past the dS^T barrier,
5 dV's and dQ's GEMMs done, 6 the dQ part staged, 7 dK's GEMM done, 9 the stage
released, 8 the loop's top (before the wait for the stage). On the GPU:

    FA3_LIBRARY=/path/to/the/diagnostic/libfa3.so python3 lab/bwd_steps.py

prints, per cell, the medians over all CTAs of each interval (cycles), the step's period and
the offset between the two warpgroups.
"""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import fa3  # noqa: E402

CELLS = ((64, True, 8192), (64, False, 8192), (64, True, 2048), (64, False, 2048),
         (64, True, 16384))
NAMES = ("full->S", "S->dP", "dP->dS st", "dS st->bar", "bar->dV,dQ", "->dQ staged",
         "->dK", "dK->next full", "(dK->released", "released->loop top", "loop top->full)")


def main() -> None:
    print(torch.cuda.get_device_name())
    for head_dim, causal, seqlen in CELLS:
        batch, heads = 16384 // seqlen, 2048 // head_dim
        q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda",
                               dtype=torch.bfloat16) for _ in range(3))
        out, lse = fa3.forward(q, k, v, causal=causal, return_lse=True)[:2]
        dout = torch.randn_like(out)
        for _ in range(5):
            grads = fa3.backward(q, k, v, out, dout, lse, causal=causal)
        torch.cuda.synchronize()
        ctas = (seqlen // 128) * batch * heads
        raw = grads[0].reshape(-1).view(torch.int64)[: ctas * 80].view(ctas, 2, 4, 10).cpu()
        iv = [[] for _ in range(11)]
        period, offset0, offset4 = [], [], []
        for c in range(ctas):
            r = raw[c]
            ok = all(0 < int(r[w, s, i + 1]) - int(r[w, s, i]) < 10**6
                     for w in range(2) for s in range(4) for i in range(7))
            ok = ok and all(0 < int(r[w, s + 1, 0]) - int(r[w, s, 7]) < 10**6
                            for w in range(2) for s in range(3))
            ok = ok and all(0 <= int(r[w, s, 9]) - int(r[w, s, 7]) < 10**6 and
                            0 <= int(r[w, s + 1, 8]) - int(r[w, s, 9]) < 10**6 and
                            0 <= int(r[w, s + 1, 0]) - int(r[w, s + 1, 8]) < 10**6
                            for w in range(2) for s in range(3))
            if not ok:
                continue
            for w in range(2):
                for s in range(4):
                    for i in range(7):
                        iv[i].append(int(r[w, s, i + 1]) - int(r[w, s, i]))
                for s in range(3):
                    iv[7].append(int(r[w, s + 1, 0]) - int(r[w, s, 7]))
                    iv[8].append(int(r[w, s, 9]) - int(r[w, s, 7]))
                    iv[9].append(int(r[w, s + 1, 8]) - int(r[w, s, 9]))
                    iv[10].append(int(r[w, s + 1, 0]) - int(r[w, s + 1, 8]))
                    period.append(int(r[w, s + 1, 0]) - int(r[w, s, 0]))
            for s in range(4):
                offset0.append(int(r[1, s, 0]) - int(r[0, s, 0]))
                offset4.append(int(r[1, s, 4]) - int(r[0, s, 4]))
        med = statistics.median
        print(f"d{head_dim} {'causal' if causal else 'full'} {seqlen}: {len(offset0) // 4} CTAs, "
              f"step period {med(period):.0f} cycles; wg1 - wg0 at 'full' {med(offset0):.0f}, "
              f"past the barrier {med(offset4):.0f}")
        print("   " + "  ".join(f"{n} {med(v):.0f}" for n, v in zip(NAMES, iv)))


if __name__ == "__main__":
    main()
