"""v79: whether `torch.autograd.grad(out, inputs, dout)` inside torch.cuda.graph, with a dout
made outside the capture, fails for a plain PyTorch attention too (then it is PyTorch's engine,
not fa3's binding). Each form runs in a process of its own: a failed capture leaves the
process's RNG in capture mode. Prints one line per form: OK, or the exception."""
import subprocess
import sys

FORM = r'''
import sys, torch, fa3
attention = sys.argv[1]
dout_where = sys.argv[2]
eager_first = sys.argv[3] == "eager-first"
dev = torch.device("cuda")
q, k, v = (torch.randn(2, 700, 4, 128, dtype=torch.bfloat16, device=dev).requires_grad_()
           for _ in range(3))

def fn(q, k, v):
    if attention == "sdpa":
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)
    return fa3.attention(q, k, v, causal=True, deterministic=True)

side = torch.cuda.Stream(dev)
if dout_where == "outside":
    dout = torch.randn(2, 700, 4, 128, dtype=torch.bfloat16, device=dev)
if eager_first:  # v78's first form: an eager call on the default stream before the warm-up
    torch.autograd.grad(fn(q, k, v), (q, k, v), dout)
side.wait_stream(torch.cuda.current_stream(dev))
with torch.cuda.stream(side):
    if dout_where == "side":
        dout = torch.randn(2, 700, 4, 128, dtype=torch.bfloat16, device=dev)
    for _ in range(2):
        torch.autograd.grad(fn(q, k, v), (q, k, v), dout)
torch.cuda.current_stream(dev).wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    grads = torch.autograd.grad(fn(q, k, v), (q, k, v), dout)
graph.replay()
torch.cuda.synchronize()
print("OK")
'''

forms = [(a, d, "no-eager") for a in ("sdpa", "fa3") for d in ("outside", "side")]
forms += [(a, "outside", "eager-first") for a in ("sdpa", "fa3")]
for attention, dout_where, eager in forms:
    r = subprocess.run([sys.executable, "-c", FORM, attention, dout_where, eager],
                       capture_output=True, text=True, timeout=120)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    err = [line for line in r.stderr.strip().splitlines() if line.strip()]
    print(f"{attention:4s} dout made {dout_where:7s} {eager:11s}: rc={r.returncode} "
          f"{last if r.returncode == 0 else (err[-1] if err else '?')}", flush=True)
