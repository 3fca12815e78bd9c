import os, sys, torch
sys.path.insert(0, "python")
import fa3
torch.manual_seed(0)
c = int(os.environ["CAUSAL"]); S = 16384; d = 64
B, H = 16384 // S, 2048 // d
q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
fa3.backward(q, k, v, out, do, lse, causal=bool(c))
torch.cuda.synchronize()
