"""The user-facing functions: attention forward on PyTorch tensors, kernel inspection and
tuning-table validation.

PyTorch is imported inside the functions that take tensors, so ``import fa3`` (and
kernels(), validate_tuning_table(), library_path()) work without it.

What is checked where: Python checks only what the C API cannot express or see - a
tensor type, its device, its number of dimensions, a contiguous last dimension and a dtype
that has an fa3_dtype value. Everything else (dtype support, head_dim, shapes agreeing,
GQA divisibility, strides, alignment...) is the library's to check, and its sentence
reaches the user unchanged in the Fa3Error.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union

from ._lib import DType, Fa3Params, Fa3Tensor, Library, get_library, raise_for_status
from ._lib import open_library as _open_library
from .handle import PathLike, handle_for_device

if TYPE_CHECKING:  # only for type checkers: importing fa3 must not need torch
    import torch

ForwardResult = Union["torch.Tensor", Tuple["torch.Tensor", "torch.Tensor"]]


# ---- library-level functions (no torch, no GPU) ---------------------------------------


def library_path() -> str:
    """The path of the libfa3 shared library this package loaded (loading it if needed)."""
    return get_library().path


def kernels() -> list[str]:
    """The names of the kernels compiled into libfa3, e.g.
    "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal" (the name encodes the kernel's config)."""
    return _kernels(get_library())


def _kernels(lib: Library) -> list[str]:
    names = []
    for index in range(lib.fa3_kernel_count()):
        raw = lib.fa3_kernel_name(index)
        if raw:
            names.append(raw.decode("utf-8"))
    return names


def kernel_cubin(name: str) -> bytes:
    """The sm_90a cubin of a compiled kernel (e.g. to disassemble with cuobjdump/nvdisasm)."""
    return _kernel_cubin(get_library(), name)


def _kernel_cubin(lib: Library, name: str) -> bytes:
    data = ctypes.c_void_p()
    size = ctypes.c_size_t()
    raise_for_status(lib, lib.fa3_kernel_cubin(name.encode("utf-8"), ctypes.byref(data),
                                               ctypes.byref(size)), "fa3_kernel_cubin")
    return ctypes.string_at(data.value, size.value) if size.value else b""


def validate_tuning_table(path: PathLike) -> None:
    """Checks a tuning-table JSON file against the schema and this library's kernels.

    Needs no GPU. Returns None when the table is valid; raises Fa3Error
    (FA3_ERR_TUNING_TABLE) whose message names the file, the entry and the reason.
    """
    _validate_tuning_table(get_library(), path)


def _validate_tuning_table(lib: Library, path: PathLike) -> None:
    raise_for_status(lib, lib.fa3_tuning_table_validate(os.fsencode(path)),
                     "fa3_tuning_table_validate")


# ---- tensors -> fa3_tensor --------------------------------------------------------------


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise ImportError("fa3.forward and fa3.select_kernel take PyTorch tensors; "
                          "install torch to use them") from error
    return torch


def _fa3_dtype(torch: Any, name: str, tensor: "torch.Tensor") -> DType:
    """The fa3_dtype of a tensor. A dtype with an fa3_dtype value goes to the library even
    when the forward pass does not support it (float32): the library says why."""
    dtypes = {torch.float16: DType.FA3_F16, torch.bfloat16: DType.FA3_BF16,
              torch.float32: DType.FA3_F32}
    float8 = getattr(torch, "float8_e4m3fn", None)
    if float8 is not None:
        dtypes[float8] = DType.FA3_E4M3
    if tensor.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {tensor.dtype}, which fa3 has no type for; "
                        f"use torch.float16 or torch.bfloat16")
    return dtypes[tensor.dtype]


def _check_tensor(torch: Any, name: str, tensor: Any,
                  device: Optional["torch.device"] = None) -> None:
    """The checks only Python can make, before the library sees the tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cuda":
        raise ValueError(f"{name} must be on a CUDA device, but it is on {tensor.device}")
    if device is not None and tensor.device != device:
        raise ValueError(f"{name} is on {tensor.device} but q is on {device}; "
                         f"q, k, v and out must be on the same device")
    if tensor.dim() != 4:
        raise ValueError(f"{name} must have 4 dimensions (batch, seqlen, heads, head_dim), "
                         f"got shape {tuple(tensor.shape)}")
    # fa3_tensor has no head_dim stride: the C API can only describe a contiguous last dim.
    if tensor.size(3) > 1 and tensor.stride(3) != 1:
        raise ValueError(f"{name} must be contiguous in its last (head_dim) dimension, got "
                         f"strides {tuple(tensor.stride())}; use .contiguous() first")


def _to_fa3_tensor(torch: Any, name: str, tensor: "torch.Tensor") -> Fa3Tensor:
    """Describes a (batch, seqlen, heads, head_dim) tensor view, strides in elements."""
    batch, seqlen, heads, head_dim = tensor.shape
    stride_batch, stride_seq, stride_head, _ = tensor.stride()
    return Fa3Tensor(data=tensor.data_ptr() or None, dtype=int(_fa3_dtype(torch, name, tensor)),
                     batch=batch, seqlen=seqlen, heads=heads, head_dim=head_dim,
                     stride_batch=stride_batch, stride_seq=stride_seq,
                     stride_head=stride_head)


def _params(causal: bool, softmax_scale: Optional[float]) -> Fa3Params:
    if softmax_scale is None:
        scale = 0.0  # the C API's "1/sqrt(head_dim)"
    else:
        scale = float(softmax_scale)
        # 0 would silently mean the default in C; other bad values are the library's to reject.
        if scale == 0.0:
            raise ValueError("softmax_scale must not be 0; pass None for 1/sqrt(head_dim)")
    return Fa3Params(softmax_scale=scale, causal=1 if causal else 0)


def _check_inputs(torch: Any, q: Any, k: Any, v: Any) -> None:
    _check_tensor(torch, "q", q)
    _check_tensor(torch, "k", k, q.device)
    _check_tensor(torch, "v", v, q.device)


# ---- attention ------------------------------------------------------------------------


def forward(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", causal: bool = False,
            softmax_scale: Optional[float] = None, return_lse: bool = False,
            out: Optional["torch.Tensor"] = None, kernel: Optional[str] = None
            ) -> ForwardResult:
    """Attention forward: O = softmax(softmax_scale * Q K^T) V per (batch, head).

    Args:
        q: (batch, seqlen_q, heads, head_dim), float16 or bfloat16, on a CUDA device.
        k, v: (batch, seqlen_k, heads_kv, head_dim), same dtype and device; heads must be a
            multiple of heads_kv (GQA/MQA: query head i reads K/V head i // (heads // heads_kv)).
            Any strides with a contiguous last dimension work, e.g. views into one packed
            (batch, seqlen, 3, heads, head_dim) tensor, or ``x.transpose(1, 2)`` of a
            (batch, heads, seqlen, head_dim) tensor.
        causal: mask keys after the query; when seqlen_q != seqlen_k the mask is bottom-right
            aligned (FlashAttention's rule): query i sees keys j <= i + seqlen_k - seqlen_q.
            Rows that see no key get O = 0 and LSE = -inf.
        softmax_scale: None for 1/sqrt(head_dim).
        return_lse: also return the natural-log log-sum-exp of the scaled scores, float32
            (batch, heads, seqlen_q).
        out: optional (batch, seqlen_q, heads, head_dim) tensor to write O into (any strides
            with a contiguous last dimension); it is returned.
        kernel: run this compiled kernel (a name from fa3.kernels()) instead of the tuning
            table's pick.

    The kernel is launched asynchronously on PyTorch's current stream of q's device. This
    is a forward pass only: no autograd graph is recorded.

    Returns:
        out, or (out, lse) when return_lse.

    Raises:
        TypeError / ValueError: not a tensor, not on one CUDA device, not 4-D, last
            dimension not contiguous, a dtype fa3 has no type for.
        Fa3Error: whatever the library rejects (dtype, head_dim, shapes, GQA, strides...) or
            a CUDA failure, with the library's sentence.
    """
    return _forward(None, q, k, v, causal, softmax_scale, return_lse, out, kernel)


def _forward(library: Optional[Library], q: "torch.Tensor", k: "torch.Tensor",
             v: "torch.Tensor", causal: bool, softmax_scale: Optional[float], return_lse: bool,
             out: Optional["torch.Tensor"], kernel: Optional[str]) -> ForwardResult:
    """forward() in ``library`` (None: the package's own, loaded only after the Python-level
    checks, which must not need the library)."""
    torch = _import_torch()
    _check_inputs(torch, q, k, v)
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    else:
        _check_tensor(torch, "out", out, q.device)
    lse = None
    if return_lse:
        lse = torch.empty((q.size(0), q.size(2), q.size(1)), dtype=torch.float32,
                          device=q.device)
    q_desc, k_desc, v_desc = (_to_fa3_tensor(torch, n, t) for n, t in (("q", q), ("k", k),
                                                                         ("v", v)))
    out_desc = _to_fa3_tensor(torch, "out", out)
    params = _params(causal, softmax_scale)
    lse_pointer = lse.data_ptr() if lse is not None and lse.numel() else None
    lib = library if library is not None else get_library()
    # The device guard makes the device's primary context (PyTorch's) current on this
    # thread, so the library launches into the context that owns the tensors.
    with torch.cuda.device(q.device):
        handle = handle_for_device(q.device.index, lib)
        stream = torch.cuda.current_stream(q.device).cuda_stream or None
        if kernel is None:
            status = lib.fa3_forward(handle, q_desc, k_desc, v_desc, out_desc, lse_pointer,
                                     params, stream)
            raise_for_status(lib, status, "fa3_forward")
        else:
            if not isinstance(kernel, str):
                raise TypeError(f"kernel must be a kernel name (str), got {type(kernel).__name__}")
            status = lib.fa3_forward_with_kernel(handle, kernel.encode("utf-8"), q_desc, k_desc,
                                                 v_desc, out_desc, lse_pointer, params, stream)
            raise_for_status(lib, status, "fa3_forward_with_kernel")
    return (out, lse) if lse is not None else out


def select_kernel(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                  causal: bool = False, softmax_scale: Optional[float] = None) -> str:
    """The name of the kernel fa3.forward would run for these inputs (the tuning table's
    pick), with the same argument checks as forward. Launches nothing."""
    return _select_kernel(None, q, k, v, causal, softmax_scale)


def _select_kernel(library: Optional[Library], q: "torch.Tensor", k: "torch.Tensor",
                   v: "torch.Tensor", causal: bool, softmax_scale: Optional[float]) -> str:
    torch = _import_torch()
    _check_inputs(torch, q, k, v)
    q_desc, k_desc, v_desc = (_to_fa3_tensor(torch, n, t) for n, t in (("q", q), ("k", k),
                                                                         ("v", v)))
    params = _params(causal, softmax_scale)
    name = ctypes.c_char_p()
    lib = library if library is not None else get_library()
    with torch.cuda.device(q.device):
        handle = handle_for_device(q.device.index, lib)
        status = lib.fa3_forward_select(handle, q_desc, k_desc, v_desc, params,
                                        ctypes.byref(name))
        raise_for_status(lib, status, "fa3_forward_select")
    return name.value.decode("utf-8") if name.value else ""


# ---- a second library -------------------------------------------------------------------


class Binding:
    """fa3's functions bound to one libfa3 file, next to the package's own library: e.g.
    the previous build timed against this one in one process (bench/compare.py
    --side-by-side). Each Binding's library has its own kernels, tuning table, per-device
    handles and fa3_last_error(). Made by fa3.open_library(path)."""

    def __init__(self, library: Library) -> None:
        self._library = library

    @property
    def library(self) -> Library:
        """The loaded library (its C functions as attributes, e.g. ``fa3_kernel_count``)."""
        return self._library

    def library_path(self) -> str:
        """The file this Binding's library was loaded from."""
        return self._library.path

    def kernels(self) -> list[str]:
        """fa3.kernels() of this library."""
        return _kernels(self._library)

    def kernel_cubin(self, name: str) -> bytes:
        """fa3.kernel_cubin() of this library."""
        return _kernel_cubin(self._library, name)

    def validate_tuning_table(self, path: PathLike) -> None:
        """fa3.validate_tuning_table() against this library's kernels."""
        _validate_tuning_table(self._library, path)

    def forward(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                causal: bool = False, softmax_scale: Optional[float] = None,
                return_lse: bool = False, out: Optional["torch.Tensor"] = None,
                kernel: Optional[str] = None) -> ForwardResult:
        """fa3.forward() with this library's kernels and tuning table."""
        return _forward(self._library, q, k, v, causal, softmax_scale, return_lse, out, kernel)

    def select_kernel(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                      causal: bool = False, softmax_scale: Optional[float] = None) -> str:
        """fa3.select_kernel() with this library's tuning table."""
        return _select_kernel(self._library, q, k, v, causal, softmax_scale)

    def __repr__(self) -> str:
        return f"fa3.Binding({self._library.path!r})"


def open_library(path: PathLike) -> Binding:
    """Loads the libfa3 file at ``path`` (whatever $FA3_LIBRARY says) and returns its
    functions as a Binding. A different file than fa3.library_path() is a library of its
    own in this process; the same file is the same library (and shares its handles).

    Raises LibraryNotFoundError naming the path and why it could not be loaded.
    """
    return Binding(_open_library(path))
