"""v86 probes (GPU): what a Handle's destruction does to work still queued with it, an
inference tensor passed as out= outside inference mode, and torch.cuda.graph's capture stream.
Run from the repository root with the package importable (tools/run_python_tests.sh's path)."""
import time

import torch

import fa3

dev = torch.device("cuda", 0)
torch.manual_seed(0)
stream = torch.cuda.current_stream(dev)
SPIN = int(100e6)  # torch.cuda._sleep cycles: ~50 ms ahead of the kernel at ~2 GHz

for causal in (False, True):
    q = torch.randn(1, 16384, 16, 128, device=dev, dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    kept = fa3.Handle(0)
    want = fa3.forward(q, k, v, causal=causal, handle=kept)  # loads its modules, counter
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN)
    started = time.perf_counter()
    fa3.forward(q, k, v, causal=causal, handle=kept)
    print(f"causal={causal} kept handle: stream done at return {stream.query()}, "
          f"host {1e3 * (time.perf_counter() - started):.1f} ms")
    torch.cuda.synchronize()
    for round_ in range(3):
        torch.cuda._sleep(SPIN)
        started = time.perf_counter()
        # A temporary handle: collected (fa3_destroy) as soon as the call returns.
        got = fa3.forward(q, k, v, causal=causal, handle=fa3.Handle(0))
        host_ms = 1e3 * (time.perf_counter() - started)
        done = stream.query()
        torch.cuda.synchronize()
        print(f"causal={causal} temporary handle {round_}: stream done at return {done}, "
              f"host {host_ms:.1f} ms, output equal to the kept handle's {torch.equal(got, want)}")
    kept.close()

q = torch.randn(2, 1024, 8, 64, device=dev, dtype=torch.bfloat16)
k, v = torch.randn_like(q), torch.randn_like(q)
with torch.inference_mode():
    out = torch.full_like(q, float("nan"))
try:
    fa3.forward(q, k, v, out=out)
    print("inference-mode out= outside inference mode: accepted")
except Exception as error:  # noqa: BLE001 - the probe reports whatever it is
    torch.cuda.synchronize()
    print(f"inference-mode out= outside inference mode: {type(error).__name__}: {error}; "
          f"out written anyway: {not torch.isnan(out).any().item()}")

first, second = torch.cuda.graph(torch.cuda.CUDAGraph()), torch.cuda.graph(torch.cuda.CUDAGraph())
print(f"torch {torch.__version__}: two torch.cuda.graph contexts without stream= share their "
      f"capture stream: {first.capture_stream == second.capture_stream}")
