# v63b: does the backward's speed depend on its data? One library (FA3_LIBRARY), one code path,
# bf16 on the paper's grid shape; Q scaled by 1 (the benchmarks' N(0, 1) inputs), 0.05 (S ~ 0:
# P nearly uniform, ~1/seqlen) and 4 (peaked rows). CUDA events around each call, 3 warm-up +
# 20 timed calls per set and round, the sets' order rotating over 5 rounds; the median.
import sys, statistics, torch
sys.path.insert(0, "python")
import fa3
torch.manual_seed(0)
scales = [1.0, 0.05, 4.0]
for d, c, S in [(64, 1, 8192), (64, 0, 8192), (128, 1, 8192), (64, 1, 16384)]:
    B, H = 16384 // S, 2048 // d
    k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    q0 = torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16)
    sets = []
    for a in scales:
        q = (q0.float() * a).to(torch.bfloat16)
        out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
        sets.append((q, out, lse))
    times = {a: [] for a in scales}
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    for r in range(5):
        order = scales[r % 3:] + scales[:r % 3]
        for a in order:
            q, out, lse = sets[scales.index(a)]
            for i in range(23):
                ev[0].record()
                fa3.backward(q, k, v, out, do, lse, causal=bool(c))
                ev[1].record()
                torch.cuda.synchronize()
                if i >= 3:
                    times[a].append(ev[0].elapsed_time(ev[1]))
    flops = 2.5 * 4 * B * H * S * S * d / (2 if c else 1)
    med = {a: statistics.median(t) for a, t in times.items()}
    print(f"d{d} {'causal ' if c else ''}{S // 1024}k: " + ", ".join(
        f"Q x {a}: {med[a]:.3f} ms ({flops / med[a] / 1e9:.0f} TFLOPS, {med[1.0] / med[a]:.3f} of x 1)" for a in scales), flush=True)
    del sets, q0, k, v, do
