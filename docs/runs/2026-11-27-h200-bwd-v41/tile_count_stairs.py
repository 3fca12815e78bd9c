# Wave quantization probe: fa3 backward time vs query heads (tile count), d128 / d64 non-causal.
import sys, statistics, torch
sys.path.insert(0, "python"); sys.path.insert(0, ".anchors/fa3")
import fa3
from flash_attn_interface import flash_attn_func
torch.manual_seed(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
print(torch.cuda.get_device_name(0), "SMs", sms, flush=True)
def timeit(f, iters=12):
    for _ in range(3): f()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(0.03 * 1.8e9))
    st = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        st[i].record(); f(); en[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(st, en))
cfgs = [(128, 8192, 1, list(range(28, 37))), (128, 4096, 2, list(range(28, 37))),
        (64, 8192, 1, list(range(60, 69)))]
res = {}
for rnd in range(3):
    for d, S, B, Hs in cfgs:
        for H in (Hs if rnd % 2 == 0 else Hs[::-1]):
            q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            out, lse = fa3.forward(q, k, v, return_lse=True)
            res.setdefault((d, S, B, H), []).append(timeit(lambda: fa3.backward(q, k, v, out, do, lse)))
            leaves = [x.detach().requires_grad_() for x in (q, k, v)]
            with torch.enable_grad():
                po = flash_attn_func(*leaves)
                po = po[0] if isinstance(po, tuple) else po
            res.setdefault((d, S, B, H, "pub"), []).append(
                timeit(lambda: torch.autograd.grad(po, leaves, do, retain_graph=True)))
            del q, k, v, do, out, lse, leaves, po
for d, S, B, Hs in cfgs:
    for H in Hs:
        ms = statistics.median(res[(d, S, B, H)])
        pub = statistics.median(res[(d, S, B, H, "pub")])
        tiles = B * H * ((S + 127) // 128)
        print(f"d{d} S{S} B{B} H{H:3d} tiles {tiles:5d} waves {tiles / sms:6.2f} ms {ms:.4f} "
              f"ms/tile-wave {ms / (tiles / sms):.4f} staircase {ms / -(-tiles // sms):.4f} TF {4 * B * H * S * S * d * 2.5 / ms / 1e9:.1f} | public ms {pub:.4f} staircase {pub / -(-tiles // sms):.4f} fa3/public {pub / ms:.3f}", flush=True)
