# One backward each of fa3 and the public FA3 per cell, for ncu (ncu16.sh).
import sys, torch
sys.path.insert(0, "python"); sys.path.insert(0, ".anchors/fa3")
import fa3
from flash_attn_interface import flash_attn_func
torch.manual_seed(0)
for d, c, S in [(64, 1, 2048), (64, 1, 16384), (128, 1, 16384), (64, 0, 16384)]:
    B, H = 16384 // S, 2048 // d
    q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = fa3.forward(q, k, v, causal=bool(c), return_lse=True)
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    with torch.enable_grad():
        po = flash_attn_func(*leaves, causal=bool(c)); po = po[0] if isinstance(po, tuple) else po
    fa3.backward(q, k, v, out, do, lse, causal=bool(c))
    torch.autograd.grad(po, leaves, do, retain_graph=True)
    torch.cuda.synchronize()
