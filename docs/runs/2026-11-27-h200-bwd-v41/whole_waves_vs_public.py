# Premise probe: per-tile throughput of the backward at shapes whose tile count is / is not a
# multiple of the SM count (same seqlen, head dim). fa3 and the public FA3, order rotating.
import sys, statistics, torch
sys.path.insert(0, "python"); sys.path.insert(0, ".anchors/fa3")
import fa3
from flash_attn_interface import flash_attn_func
torch.manual_seed(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
print(torch.cuda.get_device_name(0), "SMs", sms, flush=True)
shapes = [  # (d, causal, S, B, H)
    (128, 0, 8192, 2, 16), (128, 0, 8192, 1, 33), (128, 0, 8192, 2, 17),
    (128, 0, 4096, 4, 16), (128, 0, 4096, 2, 33),
    (64, 0, 8192, 2, 32), (64, 0, 8192, 1, 66), (64, 0, 8192, 1, 65),
    (64, 0, 4096, 4, 32), (64, 0, 4096, 2, 66),
]
def tfl(d, c, S, B, H, ms): return 4 * B * H * S * S * d * 2.5 / (2 if c else 1) / ms / 1e9
def timeit(f, iters=15):
    for _ in range(3): f()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(0.05 * 1.8e9))
    st = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        st[i].record(); f(); en[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(st, en))
res = {}
for rnd in range(3):
    for (d, c, S, B, H) in shapes:
        q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        with torch.enable_grad():
            po = flash_attn_func(*leaves, causal=bool(c))
            po = po[0] if isinstance(po, tuple) else po
        sysf = {"fa3": lambda: fa3.backward(q, k, v, out, do, lse, causal=bool(c)),
                "pub": lambda: torch.autograd.grad(po, leaves, do, retain_graph=True)}
        order = ["fa3", "pub"] if rnd % 2 == 0 else ["pub", "fa3"]
        for name in order:
            res.setdefault((d, c, S, B, H, name), []).append(timeit(sysf[name]))
        del q, k, v, do, out, lse, leaves, po
for (d, c, S, B, H) in shapes:
    nb = (S + 127) // 128
    tiles = B * H * nb
    row = [f"d{d} c{c} S{S} B{B} H{H} tiles {tiles} waves {tiles / sms:.2f}"]
    for name in ["fa3", "pub"]:
        ms = statistics.median(res[(d, c, S, B, H, name)])
        row.append(f"{name} {ms:.3f} ms {tfl(d, c, S, B, H, ms):.1f} TF")
    print(" | ".join(row), flush=True)
