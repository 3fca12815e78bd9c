"""Reference attentions the GPU tests measure fa3 against (PyTorch only).

- reference_fp64: float64, written plainly (S = Q K^T * scale, mask, softmax, @ V, and the
  log-sum-exp) on the exact input values: the truth errors are measured against.
- sdpa: torch.nn.functional.scaled_dot_product_attention on the math backend, either in
  the input precision (the "same precision" baseline of FlashAttention's error rule) or
  on inputs upcast to float32.
- plain_attention / gradients: attention written out with differentiable PyTorch ops, and
  its (dq, dk, dv) by autograd, in float64 (the truth for the backward) or in the input
  precision (the backward's same-precision baseline).

Layouts: fa3 and these functions take and return (batch, seqlen, heads, head_dim); SDPA
works on (batch, heads, seqlen, head_dim), so it gets transposed views.

Causal masks are bottom-right aligned like FlashAttention (query i sees key j iff
j <= i + seqlen_k - seqlen_q); PyTorch's is_causal=True is top-left aligned, so the mask
is always built here and passed as attn_mask. Rows that see no key have O = 0 (and
LSE = -inf) in fa3 and in reference_fp64; SDPA gives NaN or 0 there, so sdpa() zeroes them.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator, Optional

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def effective_scale(head_dim: int, softmax_scale: Optional[float]) -> float:
    return 1.0 / math.sqrt(head_dim) if softmax_scale is None else softmax_scale


def causal_mask(seqlen_q: int, seqlen_k: int, device: torch.device) -> torch.Tensor:
    """(seqlen_q, seqlen_k) bool, True where query i may attend key j (bottom-right)."""
    i = torch.arange(seqlen_q, device=device).unsqueeze(1)
    j = torch.arange(seqlen_k, device=device).unsqueeze(0)
    return j <= i + (seqlen_k - seqlen_q)


def rows_without_keys(seqlen_q: int, seqlen_k: int, causal: bool,
                      device: torch.device) -> torch.Tensor:
    """(seqlen_q,) bool, True for query rows that attend no key at all."""
    if not causal:
        return torch.full((seqlen_q,), seqlen_k == 0, device=device)
    return ~causal_mask(seqlen_q, seqlen_k, device).any(dim=1)


def _heads_first(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, S, H_kv, D) -> (B, H, S, D), repeating each K/V head for its query-head group
    (query head h reads K/V head h // (H // H_kv), the library's GQA rule)."""
    group = heads // x.size(2)
    return x.repeat_interleave(group, dim=2).transpose(1, 2)


def reference_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   softmax_scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(O (B, Sq, H, D) float64, LSE (B, H, Sq) float64) of the exact inputs."""
    heads = q.size(2)
    q64 = q.double().transpose(1, 2)
    k64 = _heads_first(k.double(), heads)
    v64 = _heads_first(v.double(), heads)
    scores = (q64 @ k64.transpose(-1, -2)) * effective_scale(q.size(3), softmax_scale)
    if causal:
        allowed = causal_mask(q.size(1), k.size(1), q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # -inf for rows that see no key
    has_keys = torch.isfinite(lse).unsqueeze(-1)
    probabilities = torch.where(has_keys, torch.exp(scores - lse.unsqueeze(-1)),
                                torch.zeros_like(scores))  # softmax, 0 for empty rows
    out = probabilities @ v64
    return out.transpose(1, 2), lse


@contextlib.contextmanager
def _math_sdpa_in_input_precision(enabled: bool) -> Iterator[None]:
    """Since PyTorch 2.5 the math backend upcasts fp16/bf16 to fp32 inside unless this
    switch is on; the baseline must really compute in the input precision (S and P
    rounded to 16 bits, as the plain attention of the FlashAttention error rule does)."""
    setter = getattr(torch.backends.cuda, "allow_fp16_bf16_reduction_math_sdp", None)
    getter = getattr(torch.backends.cuda, "fp16_bf16_reduction_math_sdp_allowed", None)
    if setter is None or getter is None:
        yield  # older PyTorch: the math backend computes in the input precision anyway
        return
    previous = getter()
    setter(enabled)
    try:
        yield
    finally:
        setter(previous)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
         softmax_scale: Optional[float] = None,
         dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """SDPA (math backend) in ``dtype`` (default: the input dtype), as (B, Sq, H, D)."""
    dtype = dtype or q.dtype
    heads = q.size(2)
    q_bhsd = q.to(dtype).transpose(1, 2)
    k_bhsd = _heads_first(k.to(dtype), heads)
    v_bhsd = _heads_first(v.to(dtype), heads)
    mask = causal_mask(q.size(1), k.size(1), q.device) if causal else None
    in_input_precision = dtype in (torch.float16, torch.bfloat16)
    with sdpa_kernel(SDPBackend.MATH), _math_sdpa_in_input_precision(in_input_precision):
        out = F.scaled_dot_product_attention(q_bhsd, k_bhsd, v_bhsd, attn_mask=mask,
                                             scale=effective_scale(q.size(3), softmax_scale))
    out = out.transpose(1, 2)
    empty_rows = rows_without_keys(q.size(1), k.size(1), causal, q.device)
    return out.masked_fill(empty_rows.view(1, -1, 1, 1), 0.0)


def plain_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                    softmax_scale: Optional[float] = None) -> torch.Tensor:
    """O (B, Sq, H, D) in the inputs' dtype, by differentiable ops: S = Q K^T * scale (each
    rounded to the dtype), the bottom-right causal mask, softmax (PyTorch's, fp32 inside,
    P rounded to the dtype), P V. GQA by repeating K/V heads (autograd sums their gradients
    over the group). Rows that see no key get P = 0, and their softmax is taken over an
    unmasked row first, so no NaN enters the graph (their gradients are exactly 0)."""
    heads = q.size(2)
    q_bhsd = q.transpose(1, 2)
    k_bhsd = _heads_first(k, heads)
    v_bhsd = _heads_first(v, heads)
    scores = (q_bhsd @ k_bhsd.transpose(-1, -2)) * effective_scale(q.size(3), softmax_scale)
    empty = rows_without_keys(q.size(1), k.size(1), causal, q.device).unsqueeze(1)
    if causal:
        allowed = causal_mask(q.size(1), k.size(1), q.device) | empty
        scores = scores.masked_fill(~allowed, float("-inf"))
    probabilities = torch.softmax(scores, dim=-1).masked_fill(empty, 0.0)
    return (probabilities @ v_bhsd).transpose(1, 2)


def gradients(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor,
              causal: bool, softmax_scale: Optional[float] = None,
              dtype: Optional[torch.dtype] = None) -> tuple[torch.Tensor, ...]:
    """(dq, dk, dv) of plain_attention computed in ``dtype`` (default: the inputs') by
    autograd, for the incoming gradient dout; shaped like q, k and v."""
    dtype = dtype or q.dtype
    inputs = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
    with torch.enable_grad():
        out = plain_attention(inputs[0], inputs[1], inputs[2], causal, softmax_scale)
        return tuple(torch.autograd.grad(out, inputs, dout.to(dtype)))
