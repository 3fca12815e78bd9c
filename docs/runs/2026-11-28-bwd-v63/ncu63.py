# Warm fa3 backward calls at bf16 (head dim, causal, seqlen from argv) on the paper's grid
# shape, for ncu (the library from FA3_LIBRARY); ncu profiles the second main-kernel launch.
import sys, torch
sys.path.insert(0, "python")
import fa3
d, c, S = int(sys.argv[1]), bool(int(sys.argv[2])), int(sys.argv[3])
qscale = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0  # data63.py: Q scaled
torch.manual_seed(0)
B, H = 16384 // S, 2048 // d
q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
q = q * qscale
out, lse = fa3.forward(q, k, v, causal=c, return_lse=True)
for _ in range(3):
    fa3.backward(q, k, v, out, do, lse, causal=c)
torch.cuda.synchronize()
