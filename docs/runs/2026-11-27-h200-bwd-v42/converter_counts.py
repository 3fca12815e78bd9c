# How many query blocks the converter warps of a FA3_CONV_PRINT build converted in the main
# kernel (the postprocess's block 0 prints it once a call): two backward calls per cell.
import os, sys, torch
sys.path.insert(0, "python")
import fa3
lib = fa3.open_library(f".prev/libfa3_{os.environ.get('VARIANT', 'cvBp')}.so")
for d, c, S in [(64, 1, 2048), (64, 1, 8192), (64, 0, 2048), (64, 0, 8192), (128, 1, 8192)]:
    B, H = 16384 // S, 2048 // d
    q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = lib.forward(q, k, v, causal=bool(c), return_lse=True)
    print(f"d{d} c{c} S{S}:", flush=True)
    for _ in range(2):
        lib.backward(q, k, v, out, do, lse, causal=bool(c))
        torch.cuda.synchronize()
    sys.stdout.flush()
