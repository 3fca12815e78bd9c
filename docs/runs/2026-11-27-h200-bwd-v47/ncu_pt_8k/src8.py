import os, sys, torch
sys.path.insert(0, "python")
import fa3
torch.manual_seed(0)
S = int(os.environ.get("S", "8192")); d = 64
B, H = 16384 // S, 2048 // d
q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
out, lse = fa3.forward(q, k, v, causal=True, return_lse=True)
fa3.backward(q, k, v, out, do, lse, causal=True)
torch.cuda.synchronize()
