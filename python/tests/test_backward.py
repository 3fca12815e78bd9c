"""fa3.backward and the differentiable fa3.attention on a Hopper GPU, against PyTorch.

Skipped (with the reason) without PyTorch, without CUDA, on a GPU that is not Hopper, or
without libfa3.so; skipped too when the library was built before the backward pass (it
exports no fa3_backward). Every test draws fresh inputs from its own seed; gradients are
written into tensors filled with NaN, so an element the kernels forgot to write cannot pass.

Error rule (FlashAttention's), for each of dq, dk and dv:
max |fa3 - ref64| <= 2 * max |plain_dt - ref64| + 1e-5, where ref64 are the gradients of a
plainly written attention in float64 (autograd, attention_reference.gradients) on the same
inputs and incoming gradient, and plain_dt those of the same attention computed in the
inputs' precision. The end-of-run table lists every gradient's errors.

fa3.attention's gradients must equal calling fa3.forward(return_lse=True) and fa3.backward
directly, bit for bit (deterministic=True, so the two backward calls add dQ in one order).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import fa3  # noqa: E402
from attention_reference import gradients, rows_without_keys  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16]
HEAD_DIMS = [64, 128, 256]
ABSOLUTE_SLACK = 1e-5
NAMES = ("dq", "dk", "dv")

Record = Callable[..., None]
Gradients = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@pytest.fixture
def device(seeded: torch.device) -> torch.device:
    """The seeded Hopper device; a library without the backward (a stale build) fails."""
    missing = set(fa3._lib.get_library().missing) & set(fa3.api.BACKWARD_FUNCTIONS)
    if missing:
        pytest.fail(f"{fa3.library_path()} has no backward (lacks {', '.join(sorted(missing))});"
                    f" rebuild it")
    return seeded


@pytest.fixture(autouse=True)
def new_gradients_start_as_nan(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every gradient the binding allocates here (fa3.backward without dq, dk or dv, and so
    fa3.attention's backward) starts as NaN, as the caller's given ones do: torch.empty alone
    would hand back stale memory that may hold a right answer. Returns the names allocated."""
    allocate = fa3.api._gradient_output
    allocated: list[str] = []

    def allocate_poisoned(torch_: Any, name: str, given: Optional[torch.Tensor],
                          like: torch.Tensor) -> torch.Tensor:
        tensor = allocate(torch_, name, given, like)
        if given is None:
            tensor.fill_(float("nan"))
            allocated.append(name)
        return tensor

    monkeypatch.setattr(fa3.api, "_gradient_output", allocate_poisoned)
    return allocated


# ---- helpers --------------------------------------------------------------------------


def randn(*shape: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device=device)


def nan_like(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor of tensor's shape, dtype and device, all NaN."""
    return torch.full(tuple(tensor.shape), float("nan"), dtype=tensor.dtype,
                      device=tensor.device)


def qkv(batch: int, seqlen_q: int, seqlen_k: int, heads: int, heads_kv: int, head_dim: int,
        dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (randn(batch, seqlen_q, heads, head_dim, dtype=dtype, device=device),
            randn(batch, seqlen_k, heads_kv, head_dim, dtype=dtype, device=device),
            randn(batch, seqlen_k, heads_kv, head_dim, dtype=dtype, device=device))


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def run_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                 dout: torch.Tensor, lse: torch.Tensor, causal: bool,
                 softmax_scale: Optional[float] = None, deterministic: bool = False,
                 into: Optional[Gradients] = None) -> Gradients:
    """fa3.backward into NaN-filled gradients (or ``into``, which the caller poisoned);
    checks that the given tensors come back and that every element was written."""
    dq, dk, dv = into if into is not None else (nan_like(q), nan_like(k), nan_like(v))
    result = fa3.backward(q, k, v, out, dout, lse, causal=causal, softmax_scale=softmax_scale,
                          deterministic=deterministic, dq=dq, dk=dk, dv=dv)
    torch.cuda.synchronize()
    assert result[0] is dq and result[1] is dk and result[2] is dv
    for name, gradient in zip(NAMES, result):
        assert not torch.isnan(gradient).any(), f"fa3 left {name} elements unwritten (NaN)"
    return result


def check_gradients(grads: Gradients, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    dout: torch.Tensor, causal: bool, record: Record,
                    softmax_scale: Optional[float] = None) -> None:
    """FlashAttention's rule for each gradient, against float64 and the plain attention in
    the inputs' precision; every gradient is recorded before the first failure is raised."""
    truth = gradients(q, k, v, dout, causal, softmax_scale, dtype=torch.float64)
    plain = gradients(q, k, v, dout, causal, softmax_scale)
    failures = []
    for name, gradient, exact, baseline in zip(NAMES, grads, truth, plain):
        assert gradient.shape == exact.shape, f"{name} has shape {tuple(gradient.shape)}"
        err = max_abs(gradient, exact)
        plain_err = max_abs(baseline, exact)
        bound = 2 * plain_err + ABSOLUTE_SLACK
        record(gradient=name, err=err, plain_err=plain_err, bound=bound)
        if not math.isfinite(plain_err):  # the plain implementation's error bounds nothing
            failures.append(f"{name}: the plain {q.dtype} gradient's error is {plain_err}")
        elif not err <= bound:
            failures.append(f"{name}: max |fa3 - ref64| = {err:.3e} exceeds 2 * max "
                            f"|plain_{q.dtype} - ref64| + {ABSOLUTE_SLACK} = {bound:.3e}")
    assert not failures, "; ".join(failures)


def check_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   record: Record, softmax_scale: Optional[float] = None,
                   deterministic: bool = False, dout: Optional[torch.Tensor] = None,
                   into: Optional[Gradients] = None) -> Gradients:
    """fa3.forward with the LSE, then fa3.backward for a random dout (or the given one),
    checked against the references; returns the gradients."""
    out, lse = fa3.forward(q, k, v, causal=causal, softmax_scale=softmax_scale,
                           return_lse=True)
    if dout is None:
        dout = torch.randn_like(out)
    grads = run_backward(q, k, v, out, dout, lse, causal, softmax_scale, deterministic, into)
    check_gradients(grads, q, k, v, dout, causal, record, softmax_scale)
    return grads


def direct_gradients(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor,
                     causal: bool, softmax_scale: Optional[float] = None,
                     ) -> tuple[torch.Tensor, Gradients]:
    """(out, (dq, dk, dv)) of fa3.forward(return_lse=True) and fa3.backward(deterministic)
    called directly, on detached inputs."""
    q, k, v = (x.detach() for x in (q, k, v))
    out, lse = fa3.forward(q, k, v, causal=causal, softmax_scale=softmax_scale,
                           return_lse=True)
    return out, fa3.backward(q, k, v, out, dout, lse, causal=causal,
                             softmax_scale=softmax_scale, deterministic=True)


def assert_same_bits(actual: Gradients, expected: Gradients, what: str) -> None:
    for name, a, b in zip(NAMES, actual, expected):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {name} differs in shape"
        assert torch.equal(a, b), (f"{what}: {name} differs (max |difference| "
                                   f"{max_abs(a, b):.3e})")


# ---- numerics -------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_matches_reference(device: torch.device, gradient_report: Record, dtype: torch.dtype,
                           head_dim: int, causal: bool) -> None:
    # 197 rows: more than one query and key block, with ragged last blocks
    q, k, v = qkv(2, 197, 197, 4, 4, head_dim, dtype, device)
    check_backward(q, k, v, causal, gradient_report)


@pytest.mark.parametrize("deterministic", [False, True], ids=["fast", "deterministic"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads_kv", [2, 1], ids=["gqa4", "mqa"])
@pytest.mark.parametrize("dtype,head_dim", [(torch.bfloat16, 128), (torch.float16, 64)],
                         ids=["bf16-d128", "fp16-d64"])
def test_grouped_query_attention(device: torch.device, gradient_report: Record,
                                 dtype: torch.dtype, head_dim: int, heads_kv: int,
                                 causal: bool, deterministic: bool) -> None:
    # dk and dv are sums over the 8 // heads_kv query heads of each K/V head's group
    q, k, v = qkv(2, 160, 160, 8, heads_kv, head_dim, dtype, device)
    _, dk, dv = check_backward(q, k, v, causal, gradient_report, deterministic=deterministic)
    assert dk.shape == k.shape and dv.shape == v.shape


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(113, 1000), (1000, 113), (1, 17), (17, 1),
                                               (64, 300), (300, 64)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_different_query_and_key_lengths(device: torch.device, gradient_report: Record,
                                         seqlen_q: int, seqlen_k: int, causal: bool) -> None:
    # causal is bottom-right aligned: with seqlen_q > seqlen_k the first seqlen_q - seqlen_k
    # rows see no key, and their dq must be exactly 0
    q, k, v = qkv(1, seqlen_q, seqlen_k, 4, 2, 128, torch.bfloat16, device)
    dq, _, _ = check_backward(q, k, v, causal, gradient_report)
    empty = rows_without_keys(seqlen_q, seqlen_k, causal, device)
    assert bool((dq[:, empty] == 0).all()), "rows without keys must have dq exactly 0"


@pytest.mark.parametrize("seqlen", [1, 17, 1000])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype,head_dim", [(torch.float16, 64), (torch.bfloat16, 128)],
                         ids=["fp16-d64", "bf16-d128"])
def test_odd_lengths(device: torch.device, gradient_report: Record, dtype: torch.dtype,
                     head_dim: int, seqlen: int, causal: bool) -> None:
    q, k, v = qkv(1, seqlen, seqlen, 2, 2, head_dim, dtype, device)
    check_backward(q, k, v, causal, gradient_report)


def test_softmax_scale(device: torch.device, gradient_report: Record) -> None:
    q, k, v = qkv(1, 150, 150, 2, 2, 128, torch.bfloat16, device)
    check_backward(q, k, v, True, gradient_report, softmax_scale=0.3)


@pytest.mark.parametrize("dtype,head_dim,heads_kv,causal",
                         [(torch.bfloat16, 128, 2, True), (torch.float16, 64, 1, False),
                          (torch.bfloat16, 64, 8, True), (torch.float16, 256, 2, True)],
                         ids=["bf16-d128-gqa4-causal", "fp16-d64-mqa", "bf16-d64-mha-causal",
                              "fp16-d256-gqa4-causal"])
def test_deterministic_mode_is_bitwise_repeatable(device: torch.device, dtype: torch.dtype,
                                                  head_dim: int, heads_kv: int,
                                                  causal: bool) -> None:
    q, k, v = qkv(2, 1000, 1000, 8, heads_kv, head_dim, dtype, device)
    out, lse = fa3.forward(q, k, v, causal=causal, return_lse=True)
    dout = torch.randn_like(out)
    first = run_backward(q, k, v, out, dout, lse, causal, deterministic=True)
    for run in range(1, 10):
        again = run_backward(q, k, v, out, dout, lse, causal, deterministic=True)
        assert_same_bits(again, first, f"deterministic run {run + 1} of 10")


# ---- layouts --------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_views_into_packed_tensors(device: torch.device, gradient_report: Record,
                                   causal: bool) -> None:
    """q, k, v views into one packed (B, S, 3, H, D) tensor, the gradients written into the
    views of one packed gradient, dout a (B, H, S, D) tensor seen as (B, S, H, D): the same
    bits as contiguous tensors give."""
    packed = randn(2, 200, 3, 4, 128, dtype=torch.bfloat16, device=device)
    q, k, v = packed.unbind(dim=2)  # (B, S, H, D), stride_seq = 3 * H * D
    assert not q.is_contiguous()
    dout = randn(2, 4, 200, 128, dtype=torch.bfloat16, device=device).transpose(1, 2)
    packed_grad = torch.full(tuple(packed.shape), float("nan"), dtype=packed.dtype,
                             device=device)
    into = tuple(packed_grad.unbind(dim=2))
    grads = check_backward(q, k, v, causal, gradient_report, deterministic=True, dout=dout,
                           into=into)
    contiguous = [x.contiguous() for x in (q, k, v)]
    out, lse = fa3.forward(*contiguous, causal=causal, return_lse=True)
    expected = fa3.backward(*contiguous, out, dout.contiguous(), lse, causal=causal,
                            deterministic=True)
    assert_same_bits(grads, expected, "strided views against contiguous tensors")


def test_heads_first_storage_viewed_as_sequence_first(device: torch.device,
                                                      gradient_report: Record) -> None:
    q, k, v = (randn(2, 4, 190, 64, dtype=torch.float16, device=device).transpose(1, 2)
               for _ in range(3))  # (B, H, S, D) storage seen as (B, S, H, D)
    into = tuple(nan_like(randn(2, 4, 190, 64, dtype=torch.float16, device=device))
                 .transpose(1, 2) for _ in range(3))
    check_backward(q, k, v, False, gradient_report, into=into)


# ---- API behaviour ----------------------------------------------------------------------


def test_backward_returns_new_tensors_shaped_like_the_inputs(device: torch.device) -> None:
    q, k, v = qkv(2, 100, 120, 4, 2, 64, torch.float16, device)
    out, lse = fa3.forward(q, k, v, return_lse=True)
    dq, dk, dv = fa3.backward(q, k, v, out, torch.randn_like(out), lse)
    for gradient, like in ((dq, q), (dk, k), (dv, v)):
        assert gradient.shape == like.shape and gradient.dtype == like.dtype
        assert gradient.device == like.device and gradient.is_contiguous()


def test_backward_runs_on_the_current_stream(device: torch.device) -> None:
    q, k, v = qkv(2, 256, 256, 4, 4, 128, torch.float16, device)
    out, lse = fa3.forward(q, k, v, causal=True, return_lse=True)
    dout = torch.randn_like(out)
    expected = fa3.backward(q, k, v, out, dout, lse, causal=True, deterministic=True)
    torch.cuda.synchronize()
    side = torch.cuda.Stream(device=device)
    with torch.cuda.stream(side):
        # The side stream is held up before the gradients are filled with NaN: kernels
        # launched on any other stream would write them first and be overwritten by the fill.
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(100_000_000)  # ~50 ms of GPU clock cycles
        grads = (nan_like(q), nan_like(k), nan_like(v))
        fa3.backward(q, k, v, out, dout, lse, causal=True, deterministic=True, dq=grads[0],
                     dk=grads[1], dv=grads[2])
        differences = [(g.float() - e.float()).abs().max() for g, e in zip(grads, expected)]
    side.synchronize()
    for name, difference in zip(NAMES, differences):
        assert difference.item() == 0.0, f"fa3 did not write {name} on PyTorch's current stream"


def test_the_workspace_is_pytorchs_and_freed_after_the_call(device: torch.device) -> None:
    q, k, v = qkv(2, 512, 512, 4, 4, 128, torch.bfloat16, device)
    out, lse = fa3.forward(q, k, v, causal=True, return_lse=True)
    dout = torch.randn_like(out)
    grads = (nan_like(q), nan_like(k), nan_like(v))
    size = fa3.backward_workspace_size(q, k, causal=True)
    assert isinstance(size, int) and size >= 0
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fa3.backward(q, k, v, out, dout, lse, causal=True, dq=grads[0], dk=grads[1], dv=grads[2])
    peak = torch.cuda.max_memory_allocated(device)
    torch.cuda.synchronize()
    assert peak - before >= size, (f"the workspace ({size} bytes) should come from PyTorch's "
                                   f"allocator; its peak grew by {peak - before} bytes")
    assert torch.cuda.memory_allocated(device) == before, "the workspace must be given back"
    assert not any(torch.isnan(g).any() for g in grads)


# ---- fa3.attention (torch.autograd.Function) ---------------------------------------------

ATTENTION_CASES = {
    # id: (batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim, dtype, causal, softmax_scale)
    "bf16-d128-full": (2, 197, 197, 4, 4, 128, torch.bfloat16, False, None),
    "fp16-d64-causal": (2, 197, 197, 4, 4, 64, torch.float16, True, None),
    "bf16-d128-gqa4-causal": (2, 160, 160, 8, 2, 128, torch.bfloat16, True, None),
    "fp16-d64-mqa": (1, 160, 160, 8, 1, 64, torch.float16, False, None),
    "fp16-d128-causal-q300-k1000": (1, 300, 1000, 4, 2, 128, torch.float16, True, None),
    "bf16-d64-causal-q1000-k300": (1, 1000, 300, 4, 4, 64, torch.bfloat16, True, None),
    "bf16-d128-scale": (1, 150, 150, 2, 2, 128, torch.bfloat16, True, 0.3),
}


@pytest.mark.parametrize("case", list(ATTENTION_CASES), ids=list(ATTENTION_CASES))
def test_attention_gradients_are_backwards_bit_for_bit(device: torch.device,
                                                       gradient_report: Record,
                                                       new_gradients_start_as_nan: list[str],
                                                       case: str) -> None:
    batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim, dtype, causal, scale = \
        ATTENTION_CASES[case]
    q, k, v = (x.requires_grad_() for x in qkv(batch, seqlen_q, seqlen_k, heads, heads_kv,
                                               head_dim, dtype, device))
    out = fa3.attention(q, k, v, causal=causal, softmax_scale=scale, deterministic=True)
    assert out.requires_grad and out.grad_fn is not None
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert new_gradients_start_as_nan == list(NAMES), "the backward's gradients were not poisoned"
    direct_out, direct = direct_gradients(q, k, v, dout, causal, scale)
    assert torch.equal(out.detach(), direct_out), "attention's output is not forward's"
    assert_same_bits(grads, direct, "fa3.attention against fa3.backward")
    check_gradients(grads, q, k, v, dout, causal, gradient_report, scale)


@pytest.mark.parametrize("case", ["bf16-d128-gqa4-causal", "fp16-d128-causal-q300-k1000"])
def test_attention_gradients_in_the_default_order(device: torch.device, gradient_report: Record,
                                                  new_gradients_start_as_nan: list[str],
                                                  case: str) -> None:
    """fa3.attention as the issue calls it (the faster, default reduction order): its
    gradients against float64 by FlashAttention's rule."""
    batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim, dtype, causal, scale = \
        ATTENTION_CASES[case]
    q, k, v = (x.requires_grad_() for x in qkv(batch, seqlen_q, seqlen_k, heads, heads_kv,
                                               head_dim, dtype, device))
    out = fa3.attention(q, k, v, causal=causal, softmax_scale=scale)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert new_gradients_start_as_nan == list(NAMES), "the backward's gradients were not poisoned"
    check_gradients(grads, q, k, v, dout, causal, gradient_report, scale)


def test_attention_through_a_packed_qkv_tensor(device: torch.device) -> None:
    packed = randn(2, 200, 3, 4, 128, dtype=torch.bfloat16, device=device).requires_grad_()
    q, k, v = packed.unbind(dim=2)
    out = fa3.attention(q, k, v, causal=True, deterministic=True)
    dout = torch.randn_like(out)
    (packed_grad,) = torch.autograd.grad(out, (packed,), dout)
    _, direct = direct_gradients(q, k, v, dout, True)
    assert_same_bits(tuple(packed_grad.unbind(dim=2)), direct, "packed qkv")


def test_attention_with_a_scalar_loss(device: torch.device) -> None:
    """out.sum().backward() hands the backward an expanded gradient (stride 0 everywhere):
    it is made contiguous, and .grad is filled as for any PyTorch op."""
    q, k, v = (x.requires_grad_() for x in qkv(1, 130, 130, 4, 2, 64, torch.float16, device))
    out = fa3.attention(q, k, v, causal=True, deterministic=True)
    out.sum().backward()
    _, direct = direct_gradients(q, k, v, torch.ones_like(out), True)
    assert_same_bits((q.grad, k.grad, v.grad), direct, "out.sum().backward()")


def test_attention_under_a_narrowed_gradient(device: torch.device) -> None:
    """torch.cat([out, x], -1) hands the backward a narrowed slice of a wider gradient: its
    strides break TMA's 16-byte rule (head stride 128 + 3 elements, 262 bytes). It is made
    contiguous first, as any PyTorch op would take it."""
    q, k, v = (x.requires_grad_() for x in qkv(1, 130, 130, 2, 2, 128, torch.bfloat16, device))
    out = fa3.attention(q, k, v, causal=True, deterministic=True)
    extra = torch.randn(*out.shape[:3], 3, dtype=out.dtype, device=device)
    wide = torch.cat([out, extra], dim=-1)
    dwide = torch.randn_like(wide)
    wide.backward(dwide)
    dout = dwide[..., :128]
    assert (dout.stride(2) * dout.element_size()) % 16 != 0  # what autograd passed on
    _, direct = direct_gradients(q, k, v, dout.contiguous(), True)
    assert_same_bits((q.grad, k.grad, v.grad), direct, "narrowed gradient")


def test_caller_outputs_are_written_as_pytorch_out_arguments(device: torch.device) -> None:
    """out= and dq=/dk=/dv= as PyTorch's out= arguments: a tensor that requires grad is
    refused in grad mode; a written one gets a new version, so a backward that saved it
    raises instead of reading fa3's values."""
    q, k, v = qkv(1, 64, 64, 2, 2, 64, torch.float16, device)
    with pytest.raises(ValueError, match="out requires grad"):
        fa3.forward(q, k, v, out=torch.empty_like(q).requires_grad_())
    with torch.no_grad():  # allowed there, as for PyTorch's ops
        fa3.forward(q, k, v, out=torch.empty_like(q).requires_grad_())
    out, lse = fa3.forward(q, k, v, return_lse=True)
    dout = torch.randn_like(out)
    with pytest.raises(ValueError, match="dk requires grad"):
        fa3.backward(q, k, v, out, dout, lse, dk=torch.empty_like(k).requires_grad_())
    for name in ("out", "dq"):
        weight = torch.randn_like(q).requires_grad_()
        saved = torch.empty_like(q)
        loss = (weight * saved).sum()  # mul saves `saved` for weight's gradient
        if name == "out":
            fa3.forward(q, k, v, out=saved)
        else:
            fa3.backward(q, k, v, out, dout, lse, dq=saved)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_empty_tensors_are_refused_by_name(device: torch.device) -> None:
    q, k, v = qkv(1, 16, 16, 2, 2, 64, torch.float16, device)
    with pytest.raises(ValueError, match=r"k has shape \(1, 0, 2, 64\)"):
        fa3.forward(q, k[:, :0], v[:, :0])
    with pytest.raises(ValueError, match=r"q has shape \(0, 16, 2, 64\)"):
        fa3.attention(q[:0], k, v)


def test_attention_for_some_inputs_only(device: torch.device) -> None:
    q, k, v = qkv(1, 128, 128, 2, 2, 128, torch.bfloat16, device)
    q.requires_grad_()
    out = fa3.attention(q, k, v, deterministic=True)
    dout = torch.randn_like(out)
    (dq,) = torch.autograd.grad(out, (q,), dout)
    _, direct = direct_gradients(q, k, v, dout, False)
    assert torch.equal(dq, direct[0])
    assert k.grad is None and v.grad is None


def test_attention_without_grad_is_the_forward(device: torch.device) -> None:
    q, k, v = (x.requires_grad_() for x in qkv(1, 128, 128, 2, 2, 64, torch.float16, device))
    with torch.no_grad():
        out = fa3.attention(q, k, v, causal=True)
    assert out.grad_fn is None and not out.requires_grad
    expected, _ = fa3.forward(q.detach(), k.detach(), v.detach(), causal=True, return_lse=True)
    assert torch.equal(out, expected)


def test_attention_in_a_model_trains(device: torch.device) -> None:
    """A projection, fa3.attention and a loss: the projection's gradient flows through."""
    x = randn(2, 64, 256, dtype=torch.bfloat16, device=device)
    weight = (randn(256, 3 * 256, dtype=torch.bfloat16, device=device) / 16).requires_grad_()
    q, k, v = (x @ weight).view(2, 64, 3, 2, 128).unbind(dim=2)
    loss = fa3.attention(q, k, v, causal=True).float().pow(2).mean()
    loss.backward()
    assert weight.grad is not None and torch.isfinite(weight.grad).all()
    assert weight.grad.abs().sum().item() > 0


@pytest.mark.parametrize("causal", [False, True])
def test_attention_in_a_cuda_graph(device: torch.device, causal: bool) -> None:
    """torch.cuda.graph captures fa3.attention's forward and a loss's backward through it, as
    PyTorch's whole-network capture does (on a stream of its own, .grad set to None before, a
    side-stream warm-up): a causal forward's tile counter is then a spare one of the library's,
    the workspace comes from PyTorch's allocator. Replays give the eager calls' bits."""
    q, k, v = (x.requires_grad_() for x in qkv(2, 700, 700, 4, 2, 128, torch.bfloat16, device))
    dout = randn(2, 700, 4, 128, dtype=torch.bfloat16, device=device)

    def step() -> torch.Tensor:
        for leaf in (q, k, v):
            leaf.grad = None
        out = fa3.attention(q, k, v, causal=causal, deterministic=True)
        (out.float() * dout.float()).sum().backward()  # out's gradient: dout, exactly
        return out

    eager_out = step().detach().clone()
    eager_grads = tuple(leaf.grad.clone() for leaf in (q, k, v))
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step()
    static_grads = (q.grad, k.grad, v.grad)
    for _ in range(3):
        for tensor in (static_out, *static_grads):
            tensor.detach().fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize(device)
        assert torch.equal(static_out, eager_out), "the replayed forward differs"
        assert_same_bits(static_grads, eager_grads, "a replay of the captured backward")


# ---- errors: the library's ----------------------------------------------------------------


def expect_library_error(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         out: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor,
                         grads: Optional[Gradients] = None, **kwargs: Any) -> fa3.Fa3Error:
    """backward must raise Fa3Error with a sentence and leave the gradients untouched."""
    grads = grads if grads is not None else (nan_like(q), nan_like(k), nan_like(v))
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.backward(q, k, v, out, dout, lse, dq=grads[0], dk=grads[1], dv=grads[2], **kwargs)
    torch.cuda.synchronize()
    assert raised.value.detail, "the library should say what was wrong"
    for name, gradient in zip(NAMES, grads):
        assert torch.isnan(gradient).all(), f"a refused call must not touch {name}"
    return raised.value


def test_head_dim_96_is_refused_as_unsupported(device: torch.device) -> None:
    # The forward refuses d96 too, so its out and LSE are stand-ins: the backward checks the
    # head dim before it reads either.
    q, k, v = qkv(1, 64, 64, 2, 2, 96, torch.bfloat16, device)
    out, lse = torch.randn_like(q), torch.zeros(1, 2, 64, dtype=torch.float32, device=device)
    error = expect_library_error(q, k, v, out, torch.randn_like(out), lse)
    assert error.status == fa3.Status.FA3_ERR_UNSUPPORTED, str(error)
    assert "64, 128 or 256" in error.detail


def test_a_dout_of_another_dtype_is_refused(device: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 64, torch.bfloat16, device)
    out, lse = fa3.forward(q, k, v, return_lse=True)
    error = expect_library_error(q, k, v, out, torch.randn_like(out).half(), lse)
    assert error.status in (fa3.Status.FA3_ERR_INVALID_ARGUMENT,
                            fa3.Status.FA3_ERR_UNSUPPORTED), str(error)


def test_a_dk_with_the_wrong_heads_is_refused(device: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 4, 2, 64, torch.bfloat16, device)
    out, lse = fa3.forward(q, k, v, return_lse=True)
    grads = (nan_like(q), nan_like(q), nan_like(v))  # dk with q's 4 heads, k has 2
    error = expect_library_error(q, k, v, out, torch.randn_like(out), lse, grads=grads)
    assert error.status == fa3.Status.FA3_ERR_INVALID_ARGUMENT, str(error)


# ---- errors: Python's (raised before the library is called) ------------------------------


def test_python_argument_errors(device: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 64, torch.float16, device)
    out, lse = fa3.forward(q, k, v, return_lse=True)
    dout = torch.randn_like(out)
    with pytest.raises(TypeError, match="lse must be float32"):
        fa3.backward(q, k, v, out, dout, lse.half())
    with pytest.raises(TypeError, match="lse must be a torch.Tensor"):
        fa3.backward(q, k, v, out, dout, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lse must have shape"):
        fa3.backward(q, k, v, out, dout, lse[:, :, :-1])
    with pytest.raises(ValueError, match="lse must be contiguous"):
        strided = torch.empty(1, 64, 2, dtype=torch.float32, device=device).transpose(1, 2)
        fa3.backward(q, k, v, out, dout, strided)
    with pytest.raises(ValueError, match="lse is on cpu"):
        fa3.backward(q, k, v, out, dout, lse.cpu())
    with pytest.raises(ValueError, match="dout must be on a CUDA device"):
        fa3.backward(q, k, v, out, dout.cpu(), lse)
    with pytest.raises(ValueError, match="contiguous in its last"):
        fa3.backward(q, k, v, out, dout.transpose(2, 3), lse)
    with pytest.raises(ValueError, match="dq must be on a CUDA device"):
        fa3.backward(q, k, v, out, dout, lse, dq=torch.empty(q.shape, dtype=q.dtype))
    with pytest.raises(ValueError, match="softmax_scale"):
        fa3.backward(q, k, v, out, dout, lse, softmax_scale=0.0)
    with pytest.raises(ValueError, match="softmax_scale"):
        fa3.attention(q, k, v, softmax_scale=0.0)
