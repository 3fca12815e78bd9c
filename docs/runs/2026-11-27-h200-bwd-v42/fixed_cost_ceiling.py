# (VARIANTS: the libraries besides v40, default nopost,nopre; CELLS: d:causal:seqlen list.)
# The ceiling of taking the pre- or postprocess off a backward call (diagnostic libraries whose
# runtime skips a launch: dQ wrong, timing only): fa3.backward through three libraries in one
# process (.prev/libfa3_v40.so the shipped one, _nopost without the postprocess, _nopre
# without the preprocess for the one-CTA-a-tile picks), and the public FA3's backward, the
# order rotating over rounds; medians of per-call CUDA-event times; bf16, the paper's grid.
import sys, statistics, torch
sys.path.insert(0, "python"); sys.path.insert(0, ".anchors/fa3")
import fa3
from flash_attn_interface import flash_attn_func
torch.manual_seed(0)
print(torch.cuda.get_device_name(0), flush=True)
import os
VARIANTS = os.environ.get("VARIANTS", "nopost,nopre").split(",")
libs = {n: fa3.open_library(f".prev/libfa3_{n}.so") for n in ["v40"] + VARIANTS}
cells = [tuple(int(x) for x in c.split(":")) for c in os.environ.get("CELLS", "64:1:2048,64:1:4096,64:1:8192,128:1:2048,128:1:4096,128:1:8192,128:0:4096,64:0:2048,64:0:4096,64:0:8192").split(",")]
ROUNDS, CALLS = 6, 12
for d, c, S in cells:
    B, H = 16384 // S, 2048 // d
    sets = [tuple(torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            for _ in range(3)]
    fw = [libs["v40"].forward(q, k, v, causal=bool(c), return_lse=True) for q, k, v, _ in sets]
    pub = []
    for q, k, v, _ in sets:
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        with torch.enable_grad():
            po = flash_attn_func(*leaves, causal=bool(c)); po = po[0] if isinstance(po, tuple) else po
        pub.append((po, leaves))
    def call(name, i):
        q, k, v, do = sets[i % 3]
        if name == "pub":
            po, leaves = pub[i % 3]
            return torch.autograd.grad(po, leaves, do, retain_graph=True)
        out, lse = fw[i % 3]
        return libs[name].backward(q, k, v, out, do, lse, causal=bool(c))
    names = ["v40", "pub"] + [n for n in VARIANTS if n != "nopre" or (d == 64 and c == 0) or (d == 128 and c == 1 and S >= 8192)]
    times = {n: [] for n in names}
    for r in range(ROUNDS):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            for i in range(3): call(n, i)
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CALLS)]
            for i, (a, b) in enumerate(ev):
                a.record(); call(n, i); b.record()
            torch.cuda.synchronize()
            times[n] += [a.elapsed_time(b) for a, b in ev]
    med = {n: statistics.median(t) for n, t in times.items()}
    s = " ".join(f"{n} {med[n]:.4f}" for n in names)
    r = " ".join(f"v40/{n} {med['v40']/med[n]:.3f}" for n in names if n != "v40")
    saved = " ".join(f"{n} {1000*(med['v40']-med[n]):.1f}" for n in names if n not in ("v40", "pub"))
    print(f"d{d} c{c} S{S:>5} ms: {s} | {r} | us saved: {saved}", flush=True)
    del sets, fw, pub
