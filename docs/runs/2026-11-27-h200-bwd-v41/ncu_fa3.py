# One warm fa3 backward at bf16 d64 causal 8k for ncu (the library from FA3_LIBRARY).
import sys, torch
sys.path.insert(0, "python")
import fa3
torch.manual_seed(0)
d, c, S = 64, 1, 8192
B, H = 16384 // S, 2048 // d
q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
out, lse = fa3.forward(q, k, v, causal=True, return_lse=True)
for _ in range(2):
    fa3.backward(q, k, v, out, do, lse, causal=True)
torch.cuda.synchronize()
