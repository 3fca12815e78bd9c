"""fa3.forward on a Hopper GPU against PyTorch references.

Skipped (with the reason) without PyTorch, without CUDA, on a GPU that is not Hopper, or
without libfa3.so. Every test draws fresh inputs from its own seed and writes into an
output filled with NaN, so a value the kernel forgot to write cannot pass.

Error rule (FlashAttention's): max |fa3 - ref64| <= 2 * max |sdpa_in_dtype - ref64| + 1e-5,
where ref64 is attention in float64 on the same inputs and sdpa_in_dtype is PyTorch's math
SDPA computing in the input precision. The error against SDPA on fp32-upcast inputs is
reported too (end-of-run table).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import fa3  # noqa: E402
from attention_reference import reference_fp64, rows_without_keys, sdpa  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16]
HEAD_DIMS = [64, 128, 256]
ABSOLUTE_SLACK = 1e-5
# The LSE is held to float64 itself, not to a plain same-precision attention, for every
# dtype: the backward recomputes P = exp(S - LSE) from it.
LSE_TOLERANCE = 1e-4

Record = Callable[..., None]


# ---- helpers --------------------------------------------------------------------------


def randn(*shape: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device=device)


def nan_like(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def poison_next_lse_allocation(q: torch.Tensor) -> None:
    """Best effort to make the LSE fa3.forward allocates start as NaN: PyTorch's caching
    allocator hands a just-freed block of the same size on the same stream to the next
    allocation, so an unwritten LSE value shows up as NaN instead of stale data."""
    poison = nan_like((q.size(0), q.size(2), q.size(1)), torch.float32, q.device)
    del poison


def run_fa3(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
            softmax_scale: Optional[float] = None, out: Optional[torch.Tensor] = None,
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """fa3.forward with return_lse into a NaN-filled output; checks both are fully written."""
    if out is None:
        out = nan_like(tuple(q.shape), q.dtype, q.device)
    poison_next_lse_allocation(q)
    result, lse = fa3.forward(q, k, v, causal=causal, softmax_scale=softmax_scale,
                              return_lse=True, out=out)
    torch.cuda.synchronize()
    assert result is out
    assert lse.shape == (q.size(0), q.size(2), q.size(1)) and lse.dtype == torch.float32
    assert not torch.isnan(out).any(), "fa3 left output elements unwritten (NaN)"
    assert not torch.isnan(lse).any(), "fa3 left LSE elements unwritten (NaN)"
    return out, lse


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def check_against_references(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                             record: Record, softmax_scale: Optional[float] = None,
                             out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Runs fa3 and applies the error rule to O and a tolerance to LSE; returns O."""
    out, lse = run_fa3(q, k, v, causal, softmax_scale, out)
    ref_out, ref_lse = reference_fp64(q, k, v, causal, softmax_scale)
    baseline = sdpa(q, k, v, causal, softmax_scale)
    sdpa_fp32 = sdpa(q, k, v, causal, softmax_scale, dtype=torch.float32)

    err = max_abs(out, ref_out)
    sdpa_err = max_abs(baseline, ref_out)
    assert math.isfinite(sdpa_err), f"the plain {q.dtype} attention's error is {sdpa_err}: it bounds nothing"
    bound = 2 * sdpa_err + ABSOLUTE_SLACK
    same_empty_rows, lse_err = compare_lse(lse, ref_lse)
    record(err=err, sdpa_err=sdpa_err, bound=bound, err_vs_sdpa_fp32=max_abs(out, sdpa_fp32),
           lse_err=lse_err)
    assert err <= bound, (f"max |fa3 - ref64| = {err:.3e} exceeds 2 * max |sdpa_{q.dtype} - "
                          f"ref64| + {ABSOLUTE_SLACK} = {bound:.3e}")
    assert same_empty_rows, "LSE is -inf on other rows than in ref64 (rows without keys)"
    assert lse_err <= LSE_TOLERANCE, f"max |LSE - ref64| = {lse_err:.3e} > {LSE_TOLERANCE}"
    # Without the LSE: kernels with the row sums by the PV GEMM (_ls) take another path.
    # Into NaN (max_abs propagates it): a freed block of the same size could hold another
    # output that already passes.
    o_only = fa3.forward(q, k, v, causal=causal, softmax_scale=softmax_scale,
                         out=nan_like(tuple(q.shape), q.dtype, q.device))
    o_only_err = max_abs(o_only, ref_out)
    assert o_only_err <= bound, (f"without the LSE, max |fa3 - ref64| = {o_only_err:.3e} "
                                 f"exceeds {bound:.3e}")
    return out


def compare_lse(lse: torch.Tensor, ref_lse: torch.Tensor) -> tuple[bool, float]:
    """(whether exactly the rows without keys are -inf in both, max |LSE - ref64| over the
    other rows)."""
    empty = torch.isneginf(ref_lse)
    same_empty_rows = torch.equal(torch.isneginf(lse), empty)
    if bool(empty.all()):
        return same_empty_rows, 0.0
    return same_empty_rows, max_abs(lse[~empty], ref_lse[~empty])


def qkv(batch: int, seqlen_q: int, seqlen_k: int, heads: int, heads_kv: int, head_dim: int,
        dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (randn(batch, seqlen_q, heads, head_dim, dtype=dtype, device=device),
            randn(batch, seqlen_k, heads_kv, head_dim, dtype=dtype, device=device),
            randn(batch, seqlen_k, heads_kv, head_dim, dtype=dtype, device=device))


# ---- numerics -------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_matches_reference(seeded: torch.device, error_report: Record, dtype: torch.dtype,
                           head_dim: int, causal: bool) -> None:
    # 197 rows: more than one query and key block, with a ragged last block
    q, k, v = qkv(2, 197, 197, 4, 4, head_dim, dtype, seeded)
    check_against_references(q, k, v, causal, error_report)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads_kv", [2, 1], ids=["gqa4", "mqa"])
@pytest.mark.parametrize("dtype,head_dim", [(torch.bfloat16, 128), (torch.float16, 64)],
                         ids=["bf16-d128", "fp16-d64"])
def test_grouped_query_attention(seeded: torch.device, error_report: Record,
                                 dtype: torch.dtype, head_dim: int, heads_kv: int,
                                 causal: bool) -> None:
    q, k, v = qkv(2, 160, 160, 8, heads_kv, head_dim, dtype, seeded)
    check_against_references(q, k, v, causal, error_report)


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(113, 1000), (1000, 113), (1, 17), (17, 1),
                                               (64, 300), (300, 64)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_different_query_and_key_lengths(seeded: torch.device, error_report: Record,
                                         seqlen_q: int, seqlen_k: int, causal: bool) -> None:
    # causal with seqlen_q > seqlen_k leaves the first seqlen_q - seqlen_k rows without keys
    q, k, v = qkv(1, seqlen_q, seqlen_k, 4, 2, 128, torch.bfloat16, seeded)
    out = check_against_references(q, k, v, causal, error_report)
    empty = rows_without_keys(seqlen_q, seqlen_k, causal, seeded)
    assert bool((out[:, empty] == 0).all()), "rows without keys must be exactly 0"


@pytest.mark.parametrize("seqlen", [1, 17, 1000])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 256], ids=lambda d: f"d{d}")
def test_odd_lengths(seeded: torch.device, error_report: Record, seqlen: int, causal: bool,
                     head_dim: int) -> None:
    q, k, v = qkv(1, seqlen, seqlen, 2, 2, head_dim, torch.float16, seeded)
    check_against_references(q, k, v, causal, error_report)


def test_softmax_scale(seeded: torch.device, error_report: Record) -> None:
    q, k, v = qkv(1, 150, 150, 2, 2, 128, torch.bfloat16, seeded)
    check_against_references(q, k, v, True, error_report, softmax_scale=0.3)


# ---- layouts --------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_views_into_a_packed_qkv_tensor(seeded: torch.device, error_report: Record,
                                        causal: bool) -> None:
    packed = randn(2, 200, 3, 4, 128, dtype=torch.bfloat16, device=seeded)
    q, k, v = packed.unbind(dim=2)  # (B, S, H, D), stride_seq = 3 * H * D
    assert not q.is_contiguous()
    out = check_against_references(q, k, v, causal, error_report)
    # (With the LSE, as check_against_references asks: a call without it may take another
    # path, whose O differs in its last bits.)
    contiguous, _ = fa3.forward(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal,
                                return_lse=True)
    assert torch.equal(out, contiguous), "a strided view must give the same bits"


def test_output_as_a_fourth_view_of_the_packed_tensor(seeded: torch.device,
                                                      error_report: Record) -> None:
    packed = randn(2, 200, 4, 4, 128, dtype=torch.bfloat16, device=seeded)
    packed[:, :, 3] = float("nan")
    inputs = packed[:, :, :3].clone()
    q, k, v, out = packed.unbind(dim=2)
    check_against_references(q, k, v, True, error_report, out=out)
    assert torch.equal(packed[:, :, :3], inputs), "o must leave q, k and v untouched"


def test_heads_first_storage_viewed_as_sequence_first(seeded: torch.device,
                                                      error_report: Record) -> None:
    q, k, v = (randn(2, 4, 190, 64, dtype=torch.float16, device=seeded).transpose(1, 2)
               for _ in range(3))  # (B, H, S, D) storage seen as (B, S, H, D)
    check_against_references(q, k, v, False, error_report)


def test_output_into_a_strided_view(seeded: torch.device, error_report: Record) -> None:
    q, k, v = qkv(2, 130, 130, 4, 4, 64, torch.bfloat16, seeded)
    out = nan_like((2, 4, 130, 64), torch.bfloat16, seeded).transpose(1, 2)
    check_against_references(q, k, v, True, error_report, out=out)
    assert torch.equal(out, fa3.forward(q, k, v, causal=True, return_lse=True)[0])


# ---- API behaviour ----------------------------------------------------------------------


def test_forward_returns_a_new_tensor_shaped_like_q(seeded: torch.device) -> None:
    q, k, v = qkv(2, 100, 120, 4, 2, 64, torch.float16, seeded)
    out = fa3.forward(q, k, v)
    assert isinstance(out, torch.Tensor)
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    assert out.is_contiguous()


def test_out_parameter_is_written_and_returned(seeded: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 128, torch.bfloat16, seeded)
    out = nan_like(tuple(q.shape), q.dtype, seeded)
    assert fa3.forward(q, k, v, out=out) is out
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()


def test_runs_on_the_current_stream(seeded: torch.device) -> None:
    q, k, v = qkv(2, 256, 256, 4, 4, 128, torch.float16, seeded)
    expected = fa3.forward(q, k, v, causal=True)
    torch.cuda.synchronize()
    side = torch.cuda.Stream(device=seeded)
    with torch.cuda.stream(side):
        # The side stream is held up before `out` is filled with NaN: a kernel launched on
        # any other stream would write `out` first and then be overwritten by the NaN fill.
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(100_000_000)  # ~50 ms of GPU clock cycles
        out = nan_like(tuple(q.shape), q.dtype, seeded)
        fa3.forward(q, k, v, causal=True, out=out)
        difference = (out.float() - expected.float()).abs().max()  # queued after fa3
    side.synchronize()
    assert difference.item() == 0.0, "fa3 did not run on PyTorch's current stream"


def test_select_kernel_names_a_compiled_kernel(seeded: torch.device) -> None:
    q, k, v = qkv(1, 128, 128, 2, 2, 128, torch.bfloat16, seeded)
    for causal in (False, True):
        name = fa3.select_kernel(q, k, v, causal=causal)
        assert name in fa3.kernels()
        assert "bf16" in name and "_d128_" in name and name.endswith("_causal") == causal


def test_forward_with_the_selected_kernel_gives_the_same_bits(seeded: torch.device) -> None:
    q, k, v = qkv(1, 200, 200, 2, 2, 64, torch.float16, seeded)
    name = fa3.select_kernel(q, k, v, causal=True)
    chosen = fa3.forward(q, k, v, causal=True, kernel=name)
    default = fa3.forward(q, k, v, causal=True)
    assert torch.equal(chosen, default)


def test_every_compiled_kernel_that_fits_matches_reference(seeded: torch.device,
                                                           error_report: Record) -> None:
    q, k, v = qkv(1, 150, 150, 2, 2, 128, torch.bfloat16, seeded)
    for causal in (False, True):
        ref_out, _ = reference_fp64(q, k, v, causal)
        plain_err = max_abs(sdpa(q, k, v, causal), ref_out)
        assert math.isfinite(plain_err), f"the plain attention's error is {plain_err}"
        bound = 2 * plain_err + ABSOLUTE_SLACK
        fitting = [n for n in fa3.kernels() if n.startswith("fa3_fwd_")
                   and "_bf16_d128_" in n and n.endswith("_causal") == causal]
        assert fitting, "no bf16 d128 kernel compiled in"
        for name in fitting:
            # Into NaN: the block a kernel gets may hold the previous kernel's right answer.
            out = fa3.forward(q, k, v, causal=causal, kernel=name,
                              out=nan_like(tuple(q.shape), q.dtype, q.device))
            assert max_abs(out, ref_out) <= bound, name


def test_a_kernel_that_does_not_fit_is_refused(seeded: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 128, torch.bfloat16, seeded)
    other = [n for n in fa3.kernels() if n.startswith("fa3_fwd_") and "_d128_" not in n]
    backward = [n for n in fa3.kernels() if n.startswith("fa3_bwd_")]  # not a forward kernel
    names = ["fa3_fwd_bf16_d128_m128_n128_s2_w2_not_compiled"] + other[:1] + backward[:1]
    for name in names:
        with pytest.raises(fa3.Fa3Error) as raised:
            fa3.forward(q, k, v, kernel=name)
        assert raised.value.status == fa3.Status.FA3_ERR_UNSUPPORTED, str(raised.value)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices")
def test_tensors_on_a_device_other_than_the_current_one(seeded: torch.device,
                                                        error_report: Record) -> None:
    other = torch.device("cuda", 1 - seeded.index if seeded.index in (0, 1) else 0)
    if torch.cuda.get_device_capability(other) != (9, 0):
        pytest.skip(f"{other} is not a Hopper GPU")
    q, k, v = qkv(1, 128, 128, 2, 2, 64, torch.float16, other)
    check_against_references(q, k, v, True, error_report)


# ---- errors: the library's ----------------------------------------------------------------


def expect_library_error(out: torch.Tensor, *args: Any, **kwargs: Any) -> fa3.Fa3Error:
    """forward must raise Fa3Error with a sentence and leave `out` untouched (NaN)."""
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.forward(*args, out=out, **kwargs)
    torch.cuda.synchronize()
    assert raised.value.detail, "the library should say what was wrong"
    assert torch.isnan(out).all(), "a refused call must not touch the output"
    return raised.value


def test_head_dim_96_is_refused_with_a_sentence_about_head_dim(seeded: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 96, torch.float16, seeded)
    error = expect_library_error(nan_like(tuple(q.shape), q.dtype, seeded), q, k, v)
    assert "head_dim" in error.detail, error.detail
    assert error.status in (fa3.Status.FA3_ERR_UNSUPPORTED, fa3.Status.FA3_ERR_INVALID_ARGUMENT)


def test_float32_inputs_are_refused(seeded: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 64, torch.float32, seeded)
    error = expect_library_error(nan_like(tuple(q.shape), q.dtype, seeded), q, k, v)
    assert "dtype" in error.detail, error.detail


def test_heads_not_a_multiple_of_kv_heads_is_refused(seeded: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 8, 3, 64, torch.bfloat16, seeded)
    error = expect_library_error(nan_like(tuple(q.shape), q.dtype, seeded), q, k, v)
    assert "heads" in error.detail, error.detail
    assert error.status == fa3.Status.FA3_ERR_INVALID_ARGUMENT


def test_mixed_dtypes_are_refused(seeded: torch.device) -> None:
    q, _, _ = qkv(1, 64, 64, 2, 2, 64, torch.float16, seeded)
    _, k, v = qkv(1, 64, 64, 2, 2, 64, torch.bfloat16, seeded)
    error = expect_library_error(nan_like(tuple(q.shape), q.dtype, seeded), q, k, v)
    assert "dtype" in error.detail, error.detail


# ---- errors: Python's (raised before the library is called) ------------------------------


def test_python_argument_errors(seeded: torch.device) -> None:
    q, k, v = qkv(1, 64, 64, 2, 2, 64, torch.float16, seeded)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fa3.forward([1.0], k, v)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="CUDA device"):
        fa3.forward(q, k.cpu(), v)
    with pytest.raises(ValueError, match="4 dimensions"):
        fa3.forward(q[0], k, v)
    with pytest.raises(ValueError, match="contiguous in its last"):
        fa3.forward(q, k.transpose(2, 3), v)
    with pytest.raises(TypeError, match="float64"):
        fa3.forward(q.double(), k, v)
    with pytest.raises(ValueError, match="softmax_scale"):
        fa3.forward(q, k, v, softmax_scale=0.0)
    with pytest.raises(ValueError, match="out must be on a CUDA device"):
        fa3.forward(q, k, v, out=torch.empty(q.shape, dtype=q.dtype))
