"""The user-facing functions: attention forward and backward on PyTorch tensors, the
differentiable attention (a torch.autograd.Function over both), kernel inspection and
tuning-table validation.

PyTorch is imported inside the functions that take tensors, so ``import fa3`` (and
kernels(), validate_tuning_table(), library_path()) work without it.

What is checked where: Python checks only what the C API cannot express or see - a
tensor type, its device, its number of dimensions, a contiguous last dimension and a dtype
that has an fa3_dtype value. Everything else (dtype support, head_dim, shapes agreeing,
GQA divisibility, strides, alignment...) is the library's to check, and its sentence
reaches the user unchanged in the Fa3Error. The backward's LSE is a bare pointer in C, so
its dtype, shape, contiguity and device are checked here.
"""

from __future__ import annotations

import ctypes
import math
import os
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union

from ._lib import DType, Fa3Params, Fa3Tensor, Library, get_library, raise_for_status
from ._lib import open_library as _open_library
from .handle import Handle, PathLike, handle_for_device

if TYPE_CHECKING:  # only for type checkers: importing fa3 must not need torch
    import torch

ForwardResult = Union["torch.Tensor", Tuple["torch.Tensor", "torch.Tensor"]]
Gradients = Tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]

# fa3_backward's workspace pointer must be 256-byte aligned (include/fa3/fa3.h).
WORKSPACE_ALIGNMENT = 256


# ---- library-level functions (no torch, no GPU) ---------------------------------------


def library_path() -> str:
    """The path of the libfa3 shared library this package loaded (loading it if needed)."""
    return get_library().path


def kernels() -> list[str]:
    """The names of the kernels compiled into libfa3, forward and backward, e.g.
    "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr_causal" or
    "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh" (the name encodes the kernel's config)."""
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
        raise ImportError("fa3.forward, fa3.backward, fa3.attention and fa3.select_kernel "
                          "take PyTorch tensors; install torch to use them") from error
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
                         f"every tensor of the call must be on q's device")
    if tensor.dim() != 4:
        raise ValueError(f"{name} must have 4 dimensions (batch, seqlen, heads, head_dim), "
                         f"got shape {tuple(tensor.shape)}")
    # An empty tensor's data_ptr() is 0: the library would call it missing, not empty.
    if 0 in tensor.shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}: fa3 needs batch, seqlen, "
                         f"heads and head_dim of at least 1")
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


def _params(causal: bool, softmax_scale: Optional[float],
            deterministic: bool = False) -> Fa3Params:
    """The one place an fa3_params is built: every field set (deterministic is 0 for the
    forward, which ignores it)."""
    if softmax_scale is None:
        scale = 0.0  # the C API's "1/sqrt(head_dim)"
    else:
        try:
            scale = float(softmax_scale)
        except OverflowError:  # e.g. 10**400
            raise ValueError(f"softmax_scale {softmax_scale!r} is too large for a float; the "
                             f"C API takes a float32") from None
        # A finite value past float32's range would reach C as inf, and its refusal would
        # quote a value the caller never gave.
        if math.isfinite(scale) and not math.isfinite(ctypes.c_float(scale).value):
            raise ValueError(f"softmax_scale {softmax_scale!r} is past float32's range "
                             f"(~3.4e38), the C API's type")
        # 0 would silently mean the default in C, and so would a value that float32 rounds to
        # 0 (below ~1.4e-45); other bad values are the library's to reject.
        if ctypes.c_float(scale).value == 0.0:
            raise ValueError(f"softmax_scale {softmax_scale!r} is 0 in float32, which the C API "
                             f"reads as the default; pass None for 1/sqrt(head_dim)")
    return Fa3Params(softmax_scale=scale, causal=1 if causal else 0,
                     deterministic=1 if deterministic else 0)


def _check_caller_output(torch: Any, name: str, tensor: Any, device: "torch.device") -> None:
    """A tensor the caller gives fa3 to write (out, dq, dk, dv): checked as an input, and
    refused when it requires grad while grad mode is on, as PyTorch's out= ops do (fa3
    writes it outside autograd)."""
    _check_tensor(torch, name, tensor, device)
    if torch.is_grad_enabled() and tensor.requires_grad:
        raise ValueError(f"{name} requires grad: fa3 writes it outside autograd; pass a tensor "
                         f"that does not (e.g. {name}.detach()), or call under torch.no_grad()")


def _written(torch: Any, *tensors: Optional["torch.Tensor"]) -> None:
    """Tells autograd that the caller's outputs were written in place (their version
    counters, which views share with their base), so a backward that saved one of them
    raises instead of reading the new values."""
    # torch.autograd.graph.increment_version is the public name (PyTorch 2.1 on); earlier
    # versions have only the private function it calls.
    increment = getattr(torch.autograd.graph, "increment_version", None)
    if increment is None:
        increment = getattr(torch._C, "_increment_version", None)
    for tensor in tensors:
        if tensor is not None and increment is not None:
            increment(tensor)


def _check_inputs(torch: Any, q: Any, k: Any, v: Any) -> None:
    _check_tensor(torch, "q", q)
    _check_tensor(torch, "k", k, q.device)
    _check_tensor(torch, "v", v, q.device)


def _check_handle(handle: Any, device: "torch.device") -> None:
    """A caller's handle: an open fa3.Handle of the tensors' device (checked before the
    library is loaded, as the tensors are)."""
    if handle is None:
        return
    if not isinstance(handle, Handle):
        raise TypeError(f"handle must be an fa3.Handle (or None for the device's cached one "
                        f"with the built-in tuning table), got {type(handle).__name__}")
    if handle.closed:
        raise ValueError(f"handle {handle!r} has been closed; pass an open one")
    if handle.device != device.index:
        raise ValueError(f"handle is for CUDA device {handle.device} but q is on {device}; "
                         f"pass a handle created for device {device.index}")


def _call_library(library: Optional[Library], handle: Optional[Handle]) -> Library:
    """The library a call runs in: ``library`` (a Binding's; None: the package's own). A
    caller's handle must belong to it: a handle holds modules loaded by one libfa3 file and
    must only reach that file's functions."""
    lib = library if library is not None else get_library()
    if handle is not None and handle._lib.cdll._handle != lib.cdll._handle:
        owner = "this Binding" if library is not None else "fa3's functions"
        raise ValueError(f"handle belongs to the libfa3 loaded from {handle._lib.path}, but "
                         f"{owner} call the one loaded from {lib.path}; pass the handle to "
                         f"its own library's functions (fa3.open_library(...) returns them)")
    return lib


def _device_handle(handle: Optional[Handle], lib: Library, device: "torch.device") -> Handle:
    """The handle a call passes to C: the caller's, or the device's cached one (created on
    first use; the caller holds the device guard, so it loads into PyTorch's context)."""
    return handle if handle is not None else handle_for_device(device.index, lib)


# ---- attention ------------------------------------------------------------------------


def forward(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", causal: bool = False,
            softmax_scale: Optional[float] = None, return_lse: bool = False,
            out: Optional["torch.Tensor"] = None, kernel: Optional[str] = None,
            handle: Optional[Handle] = None) -> ForwardResult:
    """Attention forward: O = softmax(softmax_scale * Q K^T) V per (batch, head).

    Args:
        q: (batch, seqlen_q, heads, head_dim), float16 or bfloat16, on a CUDA device.
        k, v: (batch, seqlen_k, heads_kv, head_dim), same dtype and device; heads must be a
            multiple of heads_kv (GQA/MQA: query head i reads K/V head i // (heads // heads_kv)).
            Any strides with a contiguous last dimension that the TMA copy engine can
            address work (a 16-byte-aligned start, the other strides positive multiples of
            16 bytes), e.g. views into one packed (batch, seqlen, 3, heads, head_dim)
            tensor, or ``x.transpose(1, 2)`` of a (batch, heads, seqlen, head_dim) tensor.
        causal: mask keys after the query; when seqlen_q != seqlen_k the mask is bottom-right
            aligned (FlashAttention's rule): query i sees keys j <= i + seqlen_k - seqlen_q.
            Rows that see no key get O = 0 and LSE = -inf.
        softmax_scale: None for 1/sqrt(head_dim).
        return_lse: also return the natural-log log-sum-exp of the scaled scores, float32
            (batch, heads, seqlen_q).
        out: optional (batch, seqlen_q, heads, head_dim) tensor to write O into (any strides
            with a contiguous last dimension); it is returned. As PyTorch's out= arguments:
            refused when it requires grad in grad mode, and written in place as autograd sees
            it (a backward that saved it raises).
        kernel: run this compiled kernel (a name from fa3.kernels()) instead of the tuning
            table's pick.
        handle: an fa3.Handle of q's device, e.g. ``fa3.Handle(0, tuning_table="mine.json")``
            to pick kernels by a table of your own (fa3-tune writes one); None: the device's
            cached handle, with the built-in table.

    The kernel is launched asynchronously on PyTorch's current stream of q's device. This
    is a forward pass only: no autograd graph is recorded.

    Returns:
        out, or (out, lse) when return_lse.

    Raises:
        TypeError / ValueError: not a tensor, not on one CUDA device, not 4-D, last
            dimension not contiguous, a dtype fa3 has no type for; a handle that is not an
            open fa3.Handle of q's device and of this library.
        Fa3Error: whatever the library rejects (dtype, head_dim, shapes, GQA, strides...) or
            a CUDA failure, with the library's sentence.
    """
    return _forward(None, q, k, v, causal, softmax_scale, return_lse, out, kernel, handle)


# The C API's names of tensors whose Python argument is named otherwise: its sentences say
# "o", the caller passed "out".
_C_NAMES = {"o": "out"}


def _forward(library: Optional[Library], q: "torch.Tensor", k: "torch.Tensor",
             v: "torch.Tensor", causal: bool, softmax_scale: Optional[float], return_lse: bool,
             out: Optional["torch.Tensor"], kernel: Optional[str],
             handle: Optional[Handle] = None) -> ForwardResult:
    """forward() in ``library`` (None: the package's own, loaded only after the Python-level
    checks, which must not need the library)."""
    torch = _import_torch()
    _check_inputs(torch, q, k, v)
    _check_handle(handle, q.device)
    given_out = out
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    else:
        _check_caller_output(torch, "out", out, q.device)
    lse = None
    if return_lse:
        lse = torch.empty((q.size(0), q.size(2), q.size(1)), dtype=torch.float32,
                          device=q.device)
    q_desc, k_desc, v_desc = (_to_fa3_tensor(torch, n, t) for n, t in (("q", q), ("k", k),
                                                                         ("v", v)))
    out_desc = _to_fa3_tensor(torch, "out", out)
    params = _params(causal, softmax_scale)
    lse_pointer = lse.data_ptr() if lse is not None and lse.numel() else None
    lib = _call_library(library, handle)
    # The device guard makes the device's primary context (PyTorch's) current on this
    # thread, so the library launches into the context that owns the tensors.
    with torch.cuda.device(q.device), \
            _device_handle(handle, lib, q.device)._in_use() as handle_pointer:
        stream = torch.cuda.current_stream(q.device).cuda_stream or None
        if kernel is None:
            status = lib.fa3_forward(handle_pointer, q_desc, k_desc, v_desc, out_desc,
                                     lse_pointer, params, stream)
            raise_for_status(lib, status, "fa3_forward", _C_NAMES)
        else:
            if not isinstance(kernel, str):
                raise TypeError(f"kernel must be a kernel name (str), got {type(kernel).__name__}")
            status = lib.fa3_forward_with_kernel(handle_pointer, kernel.encode("utf-8"), q_desc,
                                                 k_desc, v_desc, out_desc, lse_pointer, params,
                                                 stream)
            raise_for_status(lib, status, "fa3_forward_with_kernel", _C_NAMES)
    _written(torch, given_out)
    return (out, lse) if lse is not None else out


def select_kernel(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                  causal: bool = False, softmax_scale: Optional[float] = None,
                  handle: Optional[Handle] = None) -> str:
    """The name of the kernel fa3.forward would run for these inputs (the tuning table's
    pick: ``handle``'s table, or the built-in one when None), with the same argument checks
    as forward. Launches nothing."""
    return _select_kernel(None, q, k, v, causal, softmax_scale, handle)


def _select_kernel(library: Optional[Library], q: "torch.Tensor", k: "torch.Tensor",
                   v: "torch.Tensor", causal: bool, softmax_scale: Optional[float],
                   handle: Optional[Handle] = None) -> str:
    torch = _import_torch()
    _check_inputs(torch, q, k, v)
    _check_handle(handle, q.device)
    q_desc, k_desc, v_desc = (_to_fa3_tensor(torch, n, t) for n, t in (("q", q), ("k", k),
                                                                         ("v", v)))
    params = _params(causal, softmax_scale)
    name = ctypes.c_char_p()
    lib = _call_library(library, handle)
    with torch.cuda.device(q.device), \
            _device_handle(handle, lib, q.device)._in_use() as handle_pointer:
        status = lib.fa3_forward_select(handle_pointer, q_desc, k_desc, v_desc, params,
                                        ctypes.byref(name))
        raise_for_status(lib, status, "fa3_forward_select")
    return name.value.decode("utf-8") if name.value else ""


# ---- backward ---------------------------------------------------------------------------

# The C functions the backward needs; a library built before the backward pass lacks them.
BACKWARD_FUNCTIONS = ("fa3_backward", "fa3_backward_workspace_size")


def _require_backward(lib: Library) -> None:
    """Raises MissingFunctionError (naming the function and the library file) when ``lib``
    does not export the backward, before anything is allocated or launched."""
    for name in BACKWARD_FUNCTIONS:
        getattr(lib, name)  # Library.__getattr__ raises for a declared function it lacks


def _check_lse(torch: Any, lse: Any, q: "torch.Tensor") -> None:
    """The C API takes the LSE as a bare float* of (batch, heads, seqlen_q), so everything
    about it is checked here."""
    if not isinstance(lse, torch.Tensor):
        raise TypeError(f"lse must be a torch.Tensor, got {type(lse).__name__}")
    if lse.dtype != torch.float32:
        raise TypeError(f"lse must be float32 (as fa3.forward(..., return_lse=True) returns "
                        f"it), got {lse.dtype}")
    if lse.device != q.device:
        raise ValueError(f"lse is on {lse.device} but q is on {q.device}; every tensor of the "
                         f"call must be on q's device")
    expected = (q.size(0), q.size(2), q.size(1))
    if tuple(lse.shape) != expected:
        raise ValueError(f"lse must have shape (batch, heads, seqlen_q) = {expected}, got "
                         f"{tuple(lse.shape)}")
    if not lse.is_contiguous():
        raise ValueError(f"lse must be contiguous, got strides {tuple(lse.stride())}; use "
                         f".contiguous() first")


def _gradient_output(torch: Any, name: str, given: Optional["torch.Tensor"],
                     like: "torch.Tensor") -> "torch.Tensor":
    """The caller's dq/dk/dv (checked as forward checks out), or a new contiguous tensor
    shaped like the input it is the gradient of."""
    if given is None:
        return torch.empty(like.shape, dtype=like.dtype, device=like.device)
    _check_caller_output(torch, name, given, like.device)
    return given


def _workspace_bytes(lib: Library, handle: Any, q_desc: Fa3Tensor, k_desc: Fa3Tensor,
                     params: Fa3Params) -> int:
    size = ctypes.c_size_t()
    raise_for_status(lib, lib.fa3_backward_workspace_size(handle, q_desc, k_desc, params,
                                                          ctypes.byref(size)),
                     "fa3_backward_workspace_size")
    return int(size.value)


def _allocate_workspace(torch: Any, nbytes: int,
                        device: "torch.device") -> Tuple["torch.Tensor", int]:
    """(a uint8 tensor from PyTorch's caching allocator, a WORKSPACE_ALIGNMENT-aligned device
    address in it with nbytes behind it). The tensor is allocated on the current stream, so
    once it is freed the allocator hands its memory only to work queued after ours on that
    stream: the workspace is stream-ordered without any synchronization."""
    buffer = torch.empty(nbytes + WORKSPACE_ALIGNMENT, dtype=torch.uint8, device=device)
    pointer = buffer.data_ptr()
    aligned = (pointer + WORKSPACE_ALIGNMENT - 1) // WORKSPACE_ALIGNMENT * WORKSPACE_ALIGNMENT
    return buffer, aligned


def backward(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", out: "torch.Tensor",
             dout: "torch.Tensor", lse: "torch.Tensor", causal: bool = False,
             softmax_scale: Optional[float] = None, deterministic: bool = False,
             dq: Optional["torch.Tensor"] = None, dk: Optional["torch.Tensor"] = None,
             dv: Optional["torch.Tensor"] = None,
             handle: Optional[Handle] = None) -> Gradients:
    """Attention backward (the paper's Algorithm 3): the gradients of the loss with respect
    to q, k and v, given dout, its gradient with respect to the forward's output.

    Args:
        q, k, v: the forward's inputs, as fa3.forward takes them (BSHD, any strides with a
            contiguous last dimension, GQA/MQA by fewer K/V heads).
        out, lse: what ``fa3.forward(q, k, v, causal=..., softmax_scale=...,
            return_lse=True)`` returned for these inputs (lse: float32 (batch, heads,
            seqlen_q), contiguous). causal and softmax_scale must be the forward's.
        dout: (batch, seqlen_q, heads, head_dim), the dtype of out; any strides with a
            contiguous last dimension.
        deterministic: dq, dk and dv bitwise identical from run to run (a fixed order for
            the dQ additions), at some cost in speed; False: the faster order.
        dq, dk, dv: optional tensors to write the gradients into, shaped like q, k and v
            (any strides with a contiguous last dimension, e.g. views into one packed
            (batch, seqlen, 3, heads, head_dim) gradient); they are returned. As PyTorch's
            out= arguments: refused when they require grad in grad mode, and written in place
            as autograd sees it (a backward that saved one of them raises).
        handle: an fa3.Handle of q's device (its tuning table picks the backward kernel, as
            fa3.forward's handle does the forward's); None: the device's cached handle.

    GQA/MQA: dk and dv have k's and v's heads; each is the sum over the query heads of its
    group. Rows that see no key (causal, seqlen_q > seqlen_k) get dq = 0.

    The workspace (fp32 dQ accumulator, D = rowsum(dO * O)...) is a tensor of
    fa3_backward_workspace_size bytes from PyTorch's caching allocator, passed to
    fa3_backward and freed when the call returns: the memory is PyTorch's (visible in
    torch.cuda.memory_allocated, reused from its cache), and the call neither allocates with
    cuMemAlloc nor synchronizes, as the library's own workspace (workspace=NULL) might.
    Launched asynchronously on PyTorch's current stream of q's device. No autograd graph is
    recorded (fa3.attention is the differentiable function).

    Returns:
        (dq, dk, dv).

    Raises:
        TypeError / ValueError: as fa3.forward (handle included), and for an lse that is not
            float32, (batch, heads, seqlen_q), contiguous and on q's device.
        Fa3Error: whatever the library rejects, with its sentence (e.g. FA3_ERR_UNSUPPORTED
            for a head dim the backward does not support); nothing is launched then and the
            outputs are untouched.
        MissingFunctionError: the loaded libfa3 was built before the backward pass.
    """
    return _backward(None, q, k, v, out, dout, lse, causal, softmax_scale, deterministic,
                     dq, dk, dv, handle)


def _backward(library: Optional[Library], q: "torch.Tensor", k: "torch.Tensor",
              v: "torch.Tensor", out: "torch.Tensor", dout: "torch.Tensor",
              lse: "torch.Tensor", causal: bool, softmax_scale: Optional[float],
              deterministic: bool, dq: Optional["torch.Tensor"], dk: Optional["torch.Tensor"],
              dv: Optional["torch.Tensor"], handle: Optional[Handle] = None) -> Gradients:
    """backward() in ``library`` (None: the package's own, loaded after the Python-level
    checks; a given library is asked for the backward's functions first)."""
    if library is not None:
        _require_backward(library)
    torch = _import_torch()
    _check_inputs(torch, q, k, v)
    _check_tensor(torch, "out", out, q.device)
    _check_tensor(torch, "dout", dout, q.device)
    _check_lse(torch, lse, q)
    _check_handle(handle, q.device)
    params = _params(causal, softmax_scale, deterministic)
    lib = _call_library(library, handle)
    _require_backward(lib)
    given = (dq, dk, dv)
    dq = _gradient_output(torch, "dq", dq, q)
    dk = _gradient_output(torch, "dk", dk, k)
    dv = _gradient_output(torch, "dv", dv, v)
    q_desc, k_desc, v_desc, out_desc, dout_desc, dq_desc, dk_desc, dv_desc = (
        _to_fa3_tensor(torch, name, tensor) for name, tensor in (
            ("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("dq", dq),
            ("dk", dk), ("dv", dv)))
    lse_pointer = lse.data_ptr() or None
    with torch.cuda.device(q.device), \
            _device_handle(handle, lib, q.device)._in_use() as handle_pointer:
        stream = torch.cuda.current_stream(q.device).cuda_stream or None
        nbytes = _workspace_bytes(lib, handle_pointer, q_desc, k_desc, params)
        workspace, workspace_pointer = _allocate_workspace(torch, nbytes, q.device)
        status = lib.fa3_backward(handle_pointer, q_desc, k_desc, v_desc, out_desc,
                                  dout_desc, lse_pointer, dq_desc, dk_desc, dv_desc, params,
                                  workspace_pointer, nbytes, stream)
        raise_for_status(lib, status, "fa3_backward", _C_NAMES)
        # Back to PyTorch's cache now: only work queued after ours on this stream can get it.
        del workspace
    _written(torch, *given)
    return dq, dk, dv


def backward_workspace_size(q: "torch.Tensor", k: "torch.Tensor", causal: bool = False,
                            softmax_scale: Optional[float] = None,
                            deterministic: bool = False,
                            handle: Optional[Handle] = None) -> int:
    """The bytes of workspace fa3.backward allocates (through PyTorch) for these inputs:
    fa3_backward_workspace_size, with its argument checks on q, k and the parameters. The size
    is the problem's, whichever kernel a tuning table picks; ``handle`` is checked as
    fa3.backward checks it and asked instead of the device's cached one."""
    return _backward_workspace_size(None, q, k, causal, softmax_scale, deterministic, handle)


def _backward_workspace_size(library: Optional[Library], q: "torch.Tensor",
                             k: "torch.Tensor", causal: bool, softmax_scale: Optional[float],
                             deterministic: bool, handle: Optional[Handle] = None) -> int:
    if library is not None:
        _require_backward(library)
    torch = _import_torch()
    _check_tensor(torch, "q", q)
    _check_tensor(torch, "k", k, q.device)
    _check_handle(handle, q.device)
    params = _params(causal, softmax_scale, deterministic)
    lib = _call_library(library, handle)
    _require_backward(lib)
    q_desc, k_desc = _to_fa3_tensor(torch, "q", q), _to_fa3_tensor(torch, "k", k)
    with torch.cuda.device(q.device):
        with _device_handle(handle, lib, q.device)._in_use() as handle_pointer:
            return _workspace_bytes(lib, handle_pointer, q_desc, k_desc, params)


# ---- differentiable attention -------------------------------------------------------------

_attention_function: Optional[Any] = None  # the torch.autograd.Function, made on first use


def _usable_gradient(torch: Any, dout: "torch.Tensor") -> "torch.Tensor":
    """autograd may hand the backward a gradient fa3_backward cannot take: an expanded one
    (``out.sum().backward()`` gives stride 0 in every dimension), one whose last dimension is
    not contiguous, or one that breaks TMA's 16-byte rules (address and strides; a narrowed
    slice of a wider gradient, as ``torch.cat([out, x], -1)`` gives). Those are copied; any
    other layout is passed as it is."""
    expanded = any(stride == 0 and size > 1 for stride, size in zip(dout.stride(), dout.shape))
    unaligned = dout.data_ptr() % 16 != 0 or any(
        size > 1 and (stride * dout.element_size()) % 16 != 0
        for stride, size in zip(dout.stride()[:3], dout.shape[:3]))
    if expanded or unaligned or (dout.size(-1) > 1 and dout.stride(-1) != 1):
        return dout.contiguous()
    return dout


def _make_attention_function(torch: Any) -> Any:
    """The torch.autograd.Function behind fa3.attention (defined here because importing fa3
    must not import torch)."""
    from torch.autograd.function import once_differentiable

    class Fa3Attention(torch.autograd.Function):
        """forward: fa3.forward with the LSE; backward: fa3.backward on the saved q, k, v,
        out and LSE. Not twice differentiable."""

        @staticmethod
        def forward(ctx: Any, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                    causal: bool, softmax_scale: Optional[float], deterministic: bool,
                    library: Library, handle: Optional[Handle]) -> "torch.Tensor":
            out, lse = _forward(library, q, k, v, causal, softmax_scale, True, None, None,
                                handle)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.causal = causal
            ctx.softmax_scale = softmax_scale
            ctx.deterministic = deterministic
            ctx.library = library
            ctx.handle = handle
            return out

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, dout: "torch.Tensor") -> Tuple[Any, ...]:
            q, k, v, out, lse = ctx.saved_tensors
            dq, dk, dv = _backward(ctx.library, q, k, v, out, _usable_gradient(torch, dout),
                                   lse, ctx.causal, ctx.softmax_scale, ctx.deterministic,
                                   None, None, None, ctx.handle)
            return dq, dk, dv, None, None, None, None, None

    return Fa3Attention


def attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", causal: bool = False,
              softmax_scale: Optional[float] = None,
              deterministic: bool = False, handle: Optional[Handle] = None) -> "torch.Tensor":
    """Differentiable attention: fa3.forward, and fa3.backward when autograd asks for the
    gradients (a torch.autograd.Function).

    The forward runs fa3.forward(..., return_lse=True) and saves q, k, v, out and the LSE
    (the LSE is float32 (batch, heads, seqlen_q): 4 bytes per query row and head on top of
    what any attention saves); the backward calls fa3.backward on them, so the gradients are
    bit for bit those of calling fa3.forward and fa3.backward directly (with
    deterministic=True: also from run to run). Same conventions as fa3.forward (BSHD, strides,
    GQA/MQA, causal bottom-right aligned, softmax_scale None for 1/sqrt(head_dim)); the
    gradients come back in the inputs' dtype, as new contiguous tensors (autograd carries
    them into views such as a packed qkv tensor). An expanded or last-dimension-strided
    incoming gradient is made contiguous first. ``handle`` (an fa3.Handle of q's device, e.g.
    with a tuning table of your own) serves both passes and is kept alive by the autograd
    graph; closing it before the backward runs makes the backward raise ValueError.

    Raises what fa3.forward raises at the call, and what fa3.backward raises when the
    gradients are computed (e.g. FA3_ERR_UNSUPPORTED for a head dim the backward does not
    support); MissingFunctionError at the call when the library has no backward.
    """
    return _attention(None, q, k, v, causal, softmax_scale, deterministic, handle)


def _attention(library: Optional[Library], q: "torch.Tensor", k: "torch.Tensor",
               v: "torch.Tensor", causal: bool, softmax_scale: Optional[float],
               deterministic: bool, handle: Optional[Handle] = None) -> "torch.Tensor":
    global _attention_function
    if library is not None:
        _require_backward(library)
    torch = _import_torch()
    _check_inputs(torch, q, k, v)
    _check_handle(handle, q.device)
    _params(causal, softmax_scale, deterministic)  # softmax_scale=0 refused here, not later
    lib = _call_library(library, handle)
    _require_backward(lib)
    if _attention_function is None:
        _attention_function = _make_attention_function(torch)
    return _attention_function.apply(q, k, v, bool(causal), softmax_scale,
                                     bool(deterministic), lib, handle)


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
                kernel: Optional[str] = None,
                handle: Optional[Handle] = None) -> ForwardResult:
        """fa3.forward() with this library's kernels and tuning table (or ``handle``'s, a
        Handle made with ``library=`` this Binding's library)."""
        return _forward(self._library, q, k, v, causal, softmax_scale, return_lse, out, kernel,
                        handle)

    def select_kernel(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                      causal: bool = False, softmax_scale: Optional[float] = None,
                      handle: Optional[Handle] = None) -> str:
        """fa3.select_kernel() with this library's tuning table (or ``handle``'s)."""
        return _select_kernel(self._library, q, k, v, causal, softmax_scale, handle)

    def backward(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                 out: "torch.Tensor", dout: "torch.Tensor", lse: "torch.Tensor",
                 causal: bool = False, softmax_scale: Optional[float] = None,
                 deterministic: bool = False, dq: Optional["torch.Tensor"] = None,
                 dk: Optional["torch.Tensor"] = None,
                 dv: Optional["torch.Tensor"] = None,
                 handle: Optional[Handle] = None) -> Gradients:
        """fa3.backward() with this library's kernels (out and lse from this library's
        forward). MissingFunctionError, before anything else, when the library has no
        backward."""
        return _backward(self._library, q, k, v, out, dout, lse, causal, softmax_scale,
                         deterministic, dq, dk, dv, handle)

    def backward_workspace_size(self, q: "torch.Tensor", k: "torch.Tensor",
                                causal: bool = False, softmax_scale: Optional[float] = None,
                                deterministic: bool = False,
                                handle: Optional[Handle] = None) -> int:
        """fa3.backward_workspace_size() of this library."""
        return _backward_workspace_size(self._library, q, k, causal, softmax_scale,
                                        deterministic, handle)

    def attention(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                  causal: bool = False, softmax_scale: Optional[float] = None,
                  deterministic: bool = False,
                  handle: Optional[Handle] = None) -> "torch.Tensor":
        """fa3.attention() with this library's forward and backward."""
        return _attention(self._library, q, k, v, causal, softmax_scale, deterministic,
                          handle)

    def __repr__(self) -> str:
        return f"fa3.Binding({self._library.path!r})"


def open_library(path: PathLike) -> Binding:
    """Loads the libfa3 file at ``path`` (whatever $FA3_LIBRARY says) and returns its
    functions as a Binding. A different file than fa3.library_path() is a library of its
    own in this process; the same file is the same library (and shares its handles).

    Raises LibraryNotFoundError naming the path and why it could not be loaded.
    """
    return Binding(_open_library(path))
