# Energy per backward call at the power cap: fa3 vs the public FA3, blocks of back-to-back calls
# (~1.5 s each), NVML's total-energy counter around each block, the systems' order rotating.
import sys, time, statistics, subprocess, torch
sys.path.insert(0, "python"); sys.path.insert(0, ".anchors/fa3")
import fa3
from flash_attn_interface import flash_attn_func
try:
    import pynvml
    pynvml.nvmlInit()
    _h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    def energy_mj(): return pynvml.nvmlDeviceGetTotalEnergyConsumption(_h)
    def clock_mhz(): return pynvml.nvmlDeviceGetClockInfo(_h, pynvml.NVML_CLOCK_SM)
    src = "pynvml"
except Exception as e:  # nvidia-smi's field, mJ
    def energy_mj():
        return float(subprocess.check_output(["nvidia-smi", "--query-gpu=total_energy_consumption",
                                              "--format=csv,noheader,nounits"]).split()[0])
    def clock_mhz():
        return float(subprocess.check_output(["nvidia-smi", "--query-gpu=clocks.sm",
                                              "--format=csv,noheader,nounits"]).split()[0])
    src = f"nvidia-smi ({e})"
print(torch.cuda.get_device_name(0), "energy from", src, flush=True)
torch.manual_seed(0)
cells = [(64, 1, 8192), (64, 0, 8192), (128, 1, 8192), (128, 0, 8192), (64, 1, 2048)]
res = {}
for rnd in range(3):
    for d, c, S in cells:
        B, H = 16384 // S, 2048 // d
        q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        with torch.enable_grad():
            po = flash_attn_func(*leaves, causal=bool(c)); po = po[0] if isinstance(po, tuple) else po
        sysf = {"fa3": lambda: fa3.backward(q, k, v, out, do, lse, causal=bool(c)),
                "pub": lambda: torch.autograd.grad(po, leaves, do, retain_graph=True)}
        for name in (["fa3", "pub"] if rnd % 2 == 0 else ["pub", "fa3"]):
            f = sysf[name]
            for _ in range(3): f()
            torch.cuda.synchronize()
            t = time.perf_counter(); f(); torch.cuda.synchronize(); one = time.perf_counter() - t
            n = max(20, int(1.5 / one))
            for _ in range(n // 4): f()  # reach the cap first
            torch.cuda.synchronize()
            e0 = energy_mj(); t0 = time.perf_counter()
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n): f()
            b.record(); torch.cuda.synchronize()
            e1 = energy_mj(); t1 = time.perf_counter(); mhz = clock_mhz()
            ms = a.elapsed_time(b) / n
            joules = (e1 - e0) / 1000.0 / n
            watts = (e1 - e0) / 1000.0 / (t1 - t0)
            flops = 4 * B * H * S * S * d * 2.5 / (2 if c else 1)
            res.setdefault((d, c, S, name), []).append((ms, joules, watts, mhz, flops))
        del q, k, v, do, out, lse, leaves, po
for d, c, S in cells:
    line = [f"d{d} c{c} S{S:>5}"]
    tfw = {}
    for name in ("fa3", "pub"):
        rs = res[(d, c, S, name)]
        ms = statistics.median(r[0] for r in rs); j = statistics.median(r[1] for r in rs)
        w = statistics.median(r[2] for r in rs); mhz = statistics.median(r[3] for r in rs)
        tf = rs[0][4] / ms / 1e9
        tfw[name] = rs[0][4] / j / 1e12 * 1000  # TFLOP per kJ = TFLOPS per kW
        line.append(f"{name} {ms:.3f} ms {tf:.1f} TF {j * 1000:.1f} mJ/call {w:.0f} W {mhz:.0f} MHz {tfw[name]:.0f} TF/kW")
    line.append(f"fa3/pub time {res[(d, c, S, 'pub')][0][0] and statistics.median(r[0] for r in res[(d, c, S, 'pub')]) / statistics.median(r[0] for r in res[(d, c, S, 'fa3')]):.3f} energy {tfw['fa3'] / tfw['pub']:.3f}")
    print(" | ".join(line), flush=True)
