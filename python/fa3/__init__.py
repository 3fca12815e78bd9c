"""fa3: FlashAttention-3 for NVIDIA Hopper, from Python.

A thin ctypes binding over libfa3's C API (include/fa3/fa3.h), used with PyTorch tensors.
There is no build step: the package loads libfa3.so at first use, from $FA3_LIBRARY, next
to the package, the source tree's build/ directory, or the dynamic loader's path.

    import torch, fa3
    q, k, v = (torch.randn(2, 1024, 16, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    out = fa3.forward(q, k, v, causal=True)               # (batch, seqlen, heads, head_dim)
    out, lse = fa3.forward(q, k, v, return_lse=True)      # lse: float32 (batch, heads, seqlen)
    dout = torch.randn_like(out)                          # the gradient of a loss w.r.t. out
    dq, dk, dv = fa3.backward(q, k, v, out, dout, lse)    # gradients, from the forward's LSE

    q.requires_grad_()                                    # training: a torch.autograd.Function
    out = fa3.attention(q, k, v, causal=True)             # whose backward is fa3.backward
    out.backward(dout)

Importing fa3 needs neither torch nor a GPU; only the functions that take tensors do.

A second libfa3 (e.g. the previous build, to time both in one process) is opened with
``prev = fa3.open_library("old/libfa3.so")``; ``prev.forward(q, k, v)`` then runs its kernels.
"""

from ._lib import DType, Fa3Params, Fa3Tensor, Status
from .api import (Binding, attention, backward, backward_workspace_size, forward,
                  kernel_cubin, kernels, library_path, open_library, select_kernel,
                  validate_tuning_table)
from .errors import Fa3Error, LibraryNotFoundError, MissingFunctionError
from .handle import Handle, close_cached_handles

__version__ = "0.1.0"  # follows FA3_VERSION_MAJOR.FA3_VERSION_MINOR of include/fa3/fa3.h

__all__ = [
    "Binding",
    "DType",
    "Fa3Error",
    "Fa3Params",
    "Fa3Tensor",
    "Handle",
    "LibraryNotFoundError",
    "MissingFunctionError",
    "Status",
    "attention",
    "backward",
    "backward_workspace_size",
    "close_cached_handles",
    "forward",
    "kernel_cubin",
    "kernels",
    "library_path",
    "open_library",
    "select_kernel",
    "validate_tuning_table",
]
