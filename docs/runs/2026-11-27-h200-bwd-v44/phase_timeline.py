# fa3.backward kernel timeline (torch.profiler): pre / main / post per call, medians in us.
import sys, os, statistics, torch
sys.path.insert(0, "python")
import fa3
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
lib = os.environ.get("FA3_LIBRARY", "?").split("/")[-1]
cells = [(64, 1, 2048), (64, 1, 4096), (64, 1, 8192)]
for d, c, S in cells:
    B, H = 16384 // S, 2048 // d
    q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
    f = lambda: fa3.backward(q, k, v, out, do, lse, causal=bool(c))
    for _ in range(5): f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(int(0.02 * 1.8e9))
        for _ in range(10): f()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA" and "sleep" not in e.name]
    ev.sort(key=lambda e: e.time_range.start)
    def kind(n):
        return "pre" if n.endswith("_pre") else "post" if n.endswith("_post") else "main"
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
    print(f"{lib} d{d} c{c} S{S} calls {len(rows)}: pre {med[0]:6.1f} | main +{med[1]:5.1f} lasts {med[2]:7.1f} | post starts {med[3]:+7.1f} ends {med[4]:6.1f} after main | call {med[5]:7.1f}", flush=True)
