# Kernel timeline of fa3.backward and the public FA3's backward (torch.profiler / CUPTI):
# per kernel name, mean duration, and the call's span from the first kernel's start to the last's end.
import sys, statistics, torch
sys.path.insert(0, "python"); sys.path.insert(0, ".anchors/fa3")
import fa3
from flash_attn_interface import flash_attn_func
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
print(torch.cuda.get_device_name(0), flush=True)
cells = [(64, 1, 2048), (64, 1, 4096), (64, 1, 8192), (128, 0, 4096), (128, 1, 4096), (64, 0, 2048)]
for d, c, S in cells:
    B, H = 16384 // S, 2048 // d
    q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    with torch.enable_grad():
        po = flash_attn_func(*leaves, causal=bool(c)); po = po[0] if isinstance(po, tuple) else po
    for name, f in (("fa3", lambda: fa3.backward(q, k, v, out, do, lse, causal=bool(c))),
                    ("pub", lambda: torch.autograd.grad(po, leaves, do, retain_graph=True))):
        for _ in range(5): f()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.cuda._sleep(int(0.02 * 1.8e9))
            for _ in range(10): f()
            torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type.name == "CUDA" and "sleep" not in e.name
              and "spin_kernel" not in e.name]
        ev.sort(key=lambda e: e.time_range.start)
        names = sorted({e.name for e in ev})
        def kind(n):
            n = n.lower()
            return "pre" if ("_pre" in n or "preprocess" in n) else "post" if ("_post" in n or "postprocess" in n or "convert" in n) else "main" if ("bwd" in n) else "other"
        calls, cur = [], {}
        for e in ev:
            kd = kind(e.name)
            if kd == "pre" and cur: calls.append(cur); cur = {}
            cur.setdefault(kd, []).append(e)
        if cur: calls.append(cur)
        rows = []
        for cl in calls:
            if not all(x in cl for x in ("pre", "main", "post")): continue
            t0 = cl["pre"][0].time_range.start; pe = cl["pre"][-1].time_range.end
            m0 = cl["main"][0].time_range.start; m1 = cl["main"][-1].time_range.end
            p0 = cl["post"][0].time_range.start; p1 = cl["post"][-1].time_range.end
            rows.append((pe - t0, m0 - t0, m1 - m0, p0 - m1, p1 - m1, p1 - t0))
        med = [statistics.median(r[i] for r in rows) for i in range(6)]
        print(f"d{d} c{c} S{S} {name:3s} calls {len(rows)}: pre {med[0]:7.1f} | main starts +{med[1]:6.1f} lasts {med[2]:7.1f} | post starts {med[3]:+7.1f} ends {med[4]:6.1f} after main | call {med[5]:7.1f} us; others: {[n[:40] for n in names if kind(n) == 'other']}", flush=True)
    del q, k, v, do, out, lse, leaves, po
