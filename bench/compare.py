#!/usr/bin/env python3
"""fa3 against PyTorch SDPA's cuDNN and FlashAttention-2 backends, the previous fa3 build and
the public FlashAttention-3, forward or backward, one process.

The grid is the FlashAttention-3 paper's (Section 4.1): seqlen 512..16k, batch =
16384 / seqlen, heads = 2048 / head_dim, head_dim 64/128/256, causal off/on; bf16 unless
--dtype fp16 (or bf16,fp16). TFLOPS use the paper's formula 4 * batch * heads * seqlen^2 *
head_dim, halved for causal.

Systems (--systems): fa3 (this build's libfa3: $FA3_LIBRARY, else the source tree's
build/libfa3.so), fa3-lse (the same, asked for the LSE as training does: an _ls pick then runs
its twin without _ls, which sums the rows in fp32), cudnn and flash (SDPA's cuDNN and
FlashAttention-2 backends), fa3-prev (another libfa3 file, --prev-lib, loaded next to this
one through fa3.open_library) and
fa3-public (the public FlashAttention-3's flash_attn_interface.flash_attn_func, from
--public-fa3 DIR or wherever Python finds it).

--direction picks what is timed (docs/bench.md, "Backward"): fwd (the default) the forward
call; bwd the backward alone: each system's forward runs once per input set outside the timed
region (fa3: fa3.forward with the LSE; the others with requires_grad, recording their autograd
graph), then each timed call is fa3.backward, or torch.autograd.grad(out, (q, k, v), dout,
retain_graph=True) for the autograd-based systems (fa3-public, cudnn, flash); fwdbwd both in
each timed call. TFLOPS: the forward's count times 2.5 (bwd) or 3.5 (fwdbwd), the paper's.
Their default systems are fa3, fa3-public (left out with a line where it cannot be imported),
cudnn and flash; the forward's are fa3, cudnn and flash.
Gradients are checked against the float32 SDPA reference as outputs are. fa3-lse and (while
its library has no backward) fa3-prev are forward-only; fa3-det is fa3's deterministic
backward and fa3-prev-det the previous build's (--direction bwd or fwdbwd only).

--side-by-side is this build against the previous one and the public FA3: systems
fa3,fa3-lse,fa3-prev,fa3-public by default (cudnn or flash on request), bf16 and fp16, more
rounds (twice the number of systems, 10 calls each), and a CSV and a markdown table per dtype
with the ratios this/prev, this/public and lse/public (--out-dir). With --direction bwd its
systems are fa3,fa3-public,cudnn (ratios this/public and fa3/cuDNN) and its tables
side_by_side_bwd_<dtype>.csv and .md. It prints its time estimate first and its real time
last (docs/bench.md, "Side by side").

Method, the same for every system:
- the same inputs: several sets of (q, k, v) in fa3's layout (batch, seqlen, heads,
  head_dim), enough that one pass over them exceeds twice the L2 cache; calls rotate over
  the sets so no call finds its inputs in L2. SDPA takes (batch, heads, seqlen, head_dim):
  it gets .transpose(1, 2) views of the very same storage (physically BSHD), which both
  of its backends read without a copy. fa3, fa3-lse, fa3-prev and fa3-public take the BSHD
  tensors.
- before timing, each system's output on set 0 is compared with a float32 SDPA (math
  backend, no TF32) reference on two heads of the first batch and two of the last, every
  row, by FlashAttention's rule: its max |difference| must be at most twice that of the
  plain attention in the inputs' dtype (Q K^T, the scaling, P and P V each rounded to
  bf16 / fp16, softmax in fp32 inside; its gradients by autograd) plus 1e-5. A system over
  it is marked WRONG and not timed. The check's outputs start as NaN where a system
  allocates them (the caching allocator's free blocks of those sizes are filled with NaN
  first; fa3's are passed in NaN), so a system that leaves some unwritten cannot pass on
  another's values, and a deterministic system (fa3-det, fa3-prev-det) runs twice and must
  give the same bits. fa3-lse's LSE is not compared here, only its out (fa3_tests and
  python/tests check the LSE against float64).
- the timed calls come in --rounds rounds (default 3; --side-by-side: twice the number of
  systems), and the order of the systems that passed the check rotates from one round to
  the next (and its start from one shape to the next), so each system is timed first as
  often as the others when the rounds are a multiple of their number (the default rounds
  are rounded up to one): at
  8k-16k the system timed first right after the check gained 4-6% on the other on average,
  up to 11% in a cell (an H200, fa3 and cuDNN in both orders): the GPU reaches its power
  cap during the first system's calls. Each round of a system: warm-up
  calls, then its share of the --iters calls, each between two CUDA events on the current
  stream. The GPU is held busy (torch.cuda._sleep) while the calls are queued, so the
  events measure GPU time only, not Python or launch overhead; Python's garbage collector
  is off while they are queued (a collection pause longer than the hold would let the GPU
  run dry, and the calls queued after it would time the host). Median, p10 and p90 over
  the calls of every round are reported.
- a backend that cannot run a shape (PyTorch's reason, e.g. a head dim) is a cell with
  that reason, not a crash.
- exit status: 1 when a cell of fa3's own systems (this build's, the previous build's, any
  mode) is WRONG, 2 on an argument error, else 0.

    python3 bench/compare.py                       # the whole grid, bf16
    python3 bench/compare.py --quick --dtype fp16  # seqlens 1k/4k/16k, fewer iterations
    python3 bench/compare.py --csv out.csv --png out.png
    python3 bench/compare.py --side-by-side --prev-lib .prev/libfa3.so \\
        --public-fa3 .anchors/fa3 --dtype bf16 --out-dir gpu-out
    python3 bench/compare.py --direction bwd --quick              # fa3, cuDNN, FA2 backward
    python3 bench/compare.py --side-by-side --direction bwd --public-fa3 .anchors/fa3 \\
        --dtype bf16 --out-dir gpu-out                             # fa3, public FA3, cuDNN
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import gc
import importlib.util
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, NoReturn, Optional, Sequence

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR / "python"))

import fa3  # noqa: E402  (ctypes only: importing it needs neither torch nor the library)

# PyTorch is imported by import_torch() once the arguments are parsed, so that --help and
# argument errors work on a machine without it (the CPU machines that run make test).
torch: Any = None
F: Any = None
SDPBackend: Any = None
sdpa_kernel: Any = None
# The public FlashAttention-3's flash_attn_interface, once import_public_fa3() found it.
flash_attn_interface: Any = None


def import_torch() -> None:
    """Imports PyTorch into this module's globals (idempotent); raises ImportError."""
    global torch, F, SDPBackend, sdpa_kernel
    if torch is not None:
        return
    import torch as torch_module
    import torch.nn.functional as functional
    from torch.nn.attention import SDPBackend as backends, sdpa_kernel as force_backend

    torch, F, SDPBackend, sdpa_kernel = torch_module, functional, backends, force_backend


class TorchDtypes(Mapping):
    """bf16 / fp16 -> the torch dtype. The names alone (argparse's choices) need no torch;
    looking up a value imports it (bench/clock_trace.py and profile_call.py do)."""

    NAMES = {"bf16": "bfloat16", "fp16": "float16"}

    def __getitem__(self, name: str) -> Any:
        torch_name = self.NAMES[name]
        import_torch()
        return getattr(torch, torch_name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.NAMES)

    def __len__(self) -> int:
        return len(self.NAMES)

    def __contains__(self, name: object) -> bool:  # Mapping's would look the value up
        return name in self.NAMES


TOKENS = 16384           # batch * seqlen in the paper's grid
HIDDEN = 2048            # heads * head_dim in the paper's grid
DEFAULT_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
QUICK_SEQLENS = [1024, 4096, 16384]
DTYPES = TorchDtypes()
# FlashAttention's rule: max |ours - ref| <= RULE_FACTOR * max |plain - ref| + RULE_SLACK,
# plain being the attention in the inputs' own precision.
RULE_FACTOR = 2.0
RULE_SLACK = 1e-5
CHECKED_HEADS = 2                   # of the first batch and of the last (checked_slice)
REFERENCE_CHUNK_BYTES = 256 << 20   # float32 scores per reference chunk
# The plain attention's scores per chunk: the paper grid's 16k in one chunk (4 heads x 16k^2
# x 2 bytes), as a plain implementation computes them; chunks would round dK and dV once
# more per chunk.
PLAIN_CHUNK_BYTES = 2 << 30
POISON_COPIES = 6                   # NaN blocks of each output size put in the allocator's cache
ASSUMED_CLOCK_HZ = 2.0e9            # to turn a hold time into torch.cuda._sleep cycles
MIN_HOLD_SECONDS = 0.02             # the least hold: a few host hiccups' worth
MAX_HOLD_SECONDS = 2.0
# --side-by-side: rounds per system and calls per round. Short rounds keep each system in
# the regime the anchors and compare.py's other runs measure (a 10-call burst: both
# systems lose 5-12% once the power cap settles, measured on an H200); more rounds, not longer ones,
# give the medians their samples.
SIDE_BY_SIDE_ROUNDS_PER_SYSTEM = 2
SIDE_BY_SIDE_CALLS_PER_ROUND = 10

# What a timed call is (--direction), and its FLOPs in forward FLOPs: the paper counts the
# backward as 2.5 forwards (five matmuls of the forward's size to its two).
DIRECTIONS = ("fwd", "bwd", "fwdbwd")
DIRECTION_FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5}
DIRECTION_TITLES = {"fwd": "Forward", "bwd": "Backward", "fwdbwd": "Forward + backward"}
# What each direction's timed region holds, for the printed header (docs/bench.md has more).
DIRECTION_TIMED = {
    "fwd": "each timed call is one forward",
    "bwd": ("each timed call is one backward: fa3 (fa3-det, fa3-prev): fa3.backward on the "
            "out and LSE of one fa3.forward(return_lse=True) per input set, run before the "
            "timing; fa3-public, cudnn, flash: torch.autograd.grad(out, (q, k, v), dout, "
            "retain_graph=True) on the graph of one forward per input set with requires_grad, "
            "run before the timing"),
    "fwdbwd": ("each timed call is one forward and its backward: fa3.forward(return_lse=True) "
               "+ fa3.backward; the others: the forward with requires_grad + "
               "torch.autograd.grad"),
}
GRADIENTS = ("dq", "dk", "dv")

# Every system compare.py knows; which ones run is --systems.
SYSTEM_KEYS = ("fa3", "fa3-lse", "fa3-det", "fa3-prev", "fa3-prev-det", "fa3-public", "cudnn",
               "flash")
SIDE_BY_SIDE_SYSTEMS = ("fa3", "fa3-lse", "fa3-prev", "fa3-public")
SIDE_BY_SIDE_BACKWARD_SYSTEMS = ("fa3", "fa3-public", "cudnn")
# --direction fwd (the default) without --side-by-side.
FORWARD_SYSTEMS = ("fa3", "cudnn", "flash")
# --direction bwd or fwdbwd without --side-by-side: the four backward columns (the
# public FA3 left out, with a line, where it cannot be imported).
BACKWARD_SYSTEMS = ("fa3", "fa3-public", "cudnn", "flash")
FORWARD_ONLY_SYSTEMS = ("fa3-lse",)   # a forward variant: fa3's backward needs the LSE anyway
# The deterministic backwards (this build's, the previous build's); their forwards are fa3's.
BACKWARD_ONLY_SYSTEMS = ("fa3-det", "fa3-prev-det")
# (numerator, denominator, heading): the ratios of median TFLOPS shown when both run.
RATIOS = (("fa3", "cudnn", "fa3/cuDNN"), ("fa3", "fa3-prev", "this/prev"),
          ("fa3", "fa3-public", "this/public"), ("fa3-lse", "fa3-public", "lse/public"),
          ("fa3-det", "fa3", "det/default"), ("fa3-det", "fa3-prev-det", "det this/prev"))

LAYOUTS = ("fa3, fa3-lse, fa3-det, fa3-prev, fa3-public: q, k, v, out (and dout, dq, dk, dv) "
           "contiguous (batch, seqlen, heads, head_dim). SDPA: the same storage as (batch, "
           "heads, seqlen, head_dim) views via .transpose(1, 2) (strides S*H*D, D, H*D, 1); its "
           "output is (B, H, S, D), and dout reaches its backward as the (B, H, S, D) view of "
           "the BSHD dout.")


# ---- problems -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    seqlen: int
    head_dim: int
    causal: bool
    batch_size: int = 0  # 0: the paper's grid, TOKENS // seqlen
    num_heads: int = 0   # 0: the paper's grid, HIDDEN // head_dim
    direction: str = "fwd"  # what a timed call is: one of DIRECTIONS

    @property
    def batch(self) -> int:
        return self.batch_size or max(1, TOKENS // self.seqlen)

    @property
    def heads(self) -> int:
        return self.num_heads or max(1, HIDDEN // self.head_dim)

    @property
    def forward_flops(self) -> float:
        """The paper's count: 4 * B * H * S^2 * D, halved for causal."""
        full = 4.0 * self.batch * self.heads * self.seqlen ** 2 * self.head_dim
        return full / 2 if self.causal else full

    @property
    def flops(self) -> float:
        """The FLOPs of one timed call: the forward's count times 1 (fwd), 2.5 (bwd, the
        paper's) or 3.5 (fwdbwd)."""
        return self.forward_flops * DIRECTION_FLOP_FACTOR[self.direction]

    @property
    def config(self) -> str:
        return f"d{self.head_dim}" + (" causal" if self.causal else "")


Inputs = tuple  # (q, k, v): three torch tensors in fa3's layout


def make_input_sets(shape: Shape, dtype: "torch.dtype", device: "torch.device") -> list[Inputs]:
    """Enough (q, k, v) sets that one rotation touches more than twice the L2 cache."""
    dims = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)
    set_bytes = 3 * math.prod(dims) * torch.tensor([], dtype=dtype).element_size()
    count = max(2, math.ceil(2 * l2_cache_bytes(device) / set_bytes))
    return [tuple(torch.randn(dims, dtype=dtype, device=device) for _ in range(3))
            for _ in range(count)]


def l2_cache_bytes(device: "torch.device") -> int:
    properties = torch.cuda.get_device_properties(device)
    return int(getattr(properties, "L2_cache_size", 0) or 50 << 20)  # H100: 50 MiB


# ---- systems ------------------------------------------------------------------------------


class Unavailable(Exception):
    """A system cannot run this shape; the message says why."""


@dataclass
class Forward:
    """What a system's forward leaves for its backward: out (batch, seqlen, heads, head_dim),
    the mask, and the system's own state (fa3: q, k, v and the LSE; an autograd-based system:
    the leaves q, k, v whose graph leads to out)."""

    out: "torch.Tensor"
    causal: bool
    saved: Any


@dataclass
class System:
    key: str    # short name for CSV and options
    label: str  # what the table and the figure call it
    call: Callable[["torch.Tensor", "torch.Tensor", "torch.Tensor", bool], "torch.Tensor"]
    context: Callable[[], ContextManager[Any]] = contextlib.nullcontext
    # --direction bwd / fwdbwd (None: a forward-only system). prepare runs the forward and
    # returns what backward needs; backward returns (dq, dk, dv) shaped like q, k, v.
    prepare: Optional[Callable[["torch.Tensor", "torch.Tensor", "torch.Tensor", bool],
                               Forward]] = None
    backward: Optional[Callable[[Forward, "torch.Tensor"], tuple]] = None
    # The backward takes outputs (dq=, dk=, dv=): the check passes them filled with NaN.
    takes_outputs: bool = False
    # A deterministic backward: the check runs it twice and requires the same bits.
    deterministic: bool = False

    def run(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
            causal: bool) -> "torch.Tensor":
        """One call in (batch, seqlen, heads, head_dim); raises Unavailable with the reason."""
        return self.guarded(self.call, q, k, v, causal)

    def guarded(self, function: Callable[..., Any], *arguments: Any) -> Any:
        """function(*arguments) in the system's context; raises Unavailable with the reason
        when the system cannot run it."""
        with warnings.catch_warnings(record=True) as caught, self.context():
            warnings.simplefilter("always")
            try:
                return function(*arguments)
            # RuntimeError covers Fa3Error and CUDA out-of-memory; NotImplementedError
            # covers fa3.MissingFunctionError.
            except (RuntimeError, NotImplementedError, fa3.LibraryNotFoundError) as error:
                # SDPA explains why a forced backend cannot run in warnings, then raises.
                reasons = [str(w.message).splitlines()[0] for w in caught]
                raise Unavailable("; ".join(reasons + [first_line(error)])) from error


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def fa3_call(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
             causal: bool) -> "torch.Tensor":
    return fa3.forward(q, k, v, causal=causal)


def fa3_lse_call(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                 causal: bool) -> "torch.Tensor":
    # As training calls it: with the LSE (an _ls pick then runs its twin without _ls, which
    # sums the rows in fp32), as the public FA3 always computes it.
    out, _ = fa3.forward(q, k, v, causal=causal, return_lse=True)
    return out


def sdpa_call(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
              causal: bool) -> "torch.Tensor":
    # Views of our BSHD storage in SDPA's (B, H, S, D); seqlen_q == seqlen_k, so PyTorch's
    # top-left causal mask is the same as fa3's bottom-right one.
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2)


def public_fa3_call(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                    causal: bool) -> "torch.Tensor":
    # The public FA3 takes fa3's (B, S, H, D) and masks causal bottom-right like fa3; some
    # of its versions return (out, lse) even without return_attn_probs.
    out = flash_attn_interface.flash_attn_func(q, k, v, causal=causal)
    return out[0] if isinstance(out, tuple) else out


def fa3_prepare_for(api: Any) -> Callable[..., Forward]:
    """The forward a backward of fa3 needs: api.forward with the LSE (api: the fa3 module,
    or a fa3.Binding of another library)."""

    def prepare(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                causal: bool) -> Forward:
        out, lse = api.forward(q, k, v, causal=causal, return_lse=True)
        return Forward(out, causal, (q, k, v, lse))

    return prepare


def fa3_backward_for(api: Any, deterministic: bool = False) -> Callable[..., tuple]:
    """api.backward on what fa3_prepare_for's forward left: new dq, dk, dv (or the given
    ones: the check's NaN-filled outputs), its workspace from PyTorch's caching allocator
    (fa3.backward's own choice)."""

    def backward(forward: Forward, dout: "torch.Tensor", **outputs: "torch.Tensor") -> tuple:
        q, k, v, lse = forward.saved
        return api.backward(q, k, v, forward.out, dout, lse, causal=forward.causal,
                            deterministic=deterministic, **outputs)

    return backward


def autograd_prepare_for(call: Callable[..., "torch.Tensor"]) -> Callable[..., Forward]:
    """The forward of an autograd-based system, recording its graph: call on leaves that
    share q, k and v's storage and require grad."""

    def prepare(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                causal: bool) -> Forward:
        leaves = tuple(x.detach().requires_grad_() for x in (q, k, v))
        with torch.enable_grad():
            out = call(*leaves, causal)
        return Forward(out, causal, leaves)

    return prepare


def autograd_backward(forward: Forward, dout: "torch.Tensor") -> tuple:
    """The system's own backward through autograd. retain_graph: one forward's graph serves
    every timed call (the saved tensors stay; nothing is recomputed)."""
    return torch.autograd.grad(forward.out, forward.saved, dout, retain_graph=True)


def all_systems() -> dict[str, System]:
    """fa3 (this build) and SDPA's backends: the systems that need nothing but torch and the
    default libfa3 (bench/clock_trace.py and profile_call.py choose from these)."""
    import_torch()
    return {
        "fa3": System("fa3", "fa3", fa3_call, prepare=fa3_prepare_for(fa3),
                      backward=fa3_backward_for(fa3), takes_outputs=True),
        "fa3-lse": System("fa3-lse", "fa3 with the LSE", fa3_lse_call),
        "cudnn": System("cudnn", "cuDNN (SDPA)", sdpa_call,
                        lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION),
                        prepare=autograd_prepare_for(sdpa_call), backward=autograd_backward),
        "flash": System("flash", "FA2 (SDPA flash)", sdpa_call,
                        lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION),
                        prepare=autograd_prepare_for(sdpa_call), backward=autograd_backward),
    }


def fa3_det_system() -> System:
    """fa3's deterministic backward (--direction bwd / fwdbwd); its forward is fa3's."""
    return System("fa3-det", "fa3 deterministic", fa3_lse_call, prepare=fa3_prepare_for(fa3),
                  backward=fa3_backward_for(fa3, deterministic=True), takes_outputs=True,
                  deterministic=True)


def prev_fa3_system(binding: "fa3.Binding") -> System:
    def call(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
             causal: bool) -> "torch.Tensor":
        return binding.forward(q, k, v, causal=causal)

    return System("fa3-prev", "fa3 (previous build)", call, prepare=fa3_prepare_for(binding),
                  backward=fa3_backward_for(binding), takes_outputs=True)


def prev_fa3_det_system(binding: "fa3.Binding") -> System:
    """The previous build's deterministic backward: the deterministic mode's A/B in one
    process."""
    return dataclasses.replace(prev_fa3_system(binding), key="fa3-prev-det",
                               label="fa3 deterministic (previous build)",
                               backward=fa3_backward_for(binding, deterministic=True),
                               deterministic=True)


def public_fa3_system() -> System:
    return System("fa3-public", "FA3 (public)", public_fa3_call,
                  prepare=autograd_prepare_for(public_fa3_call), backward=autograd_backward)


def import_public_fa3(directory: Optional[str]) -> str:
    """Imports flash_attn_interface (from directory first, when given) into this module;
    returns "" or why it cannot be imported."""
    global flash_attn_interface
    if directory:
        sys.path.insert(0, os.path.abspath(directory))
    try:
        import flash_attn_interface as module
    # A build for another torch or CUDA fails in its extension: OSError (a missing library)
    # or ImportError (an undefined symbol); anything else is a bug worth its traceback.
    except (ImportError, OSError) as error:
        return first_line(error)
    flash_attn_interface = module
    return ""


# ---- correctness --------------------------------------------------------------------------


@contextlib.contextmanager
def no_tf32() -> Iterator[None]:
    """True fp32 matmuls for the reference, whatever the user's global setting."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def checked_slice(out_bshd: "torch.Tensor") -> "torch.Tensor":
    """The part of an output the check compares, every row of CHECKED_HEADS heads of the
    first batch and of the last (the last (batch, head) pairs are the last tiles a grid
    runs): (seqlen, 2 * CHECKED_HEADS, head_dim), a copy. The heads are whole attention
    problems of their own (compare.py has no GQA), so the references compute them alone."""
    return torch.cat((out_bshd[0, :, :CHECKED_HEADS], out_bshd[-1, :, -CHECKED_HEADS:]), dim=1)


def sdpa_math(rows: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
              mask: Optional["torch.Tensor"]) -> "torch.Tensor":
    """The float32 reference's attention: SDPA's math backend (no TF32 under no_tf32)."""
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(rows, k, v, attn_mask=mask)


def plain_attention(rows: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                    mask: Optional["torch.Tensor"]) -> "torch.Tensor":
    """The plain attention in the inputs' dtype, as FlashAttention's rule means it: S = Q K^T
    and its scaling each rounded to the dtype, softmax (fp32 inside, P rounded), P V. Not
    SDPA's math backend, which computes bf16 / fp16 inputs in float32 (PyTorch >= 2.5, unless
    allow_fp16_bf16_reduction_math_sdp) and so is no plain same-precision implementation."""
    scores = (rows @ k.transpose(-1, -2)) * (1.0 / math.sqrt(rows.size(-1)))
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def attention_reference(inputs: Inputs, dout: Optional["torch.Tensor"], causal: bool,
                        dtype: "torch.dtype", chunk_bytes: int,
                        attend: Callable[..., "torch.Tensor"]) -> dict[str, "torch.Tensor"]:
    """attend (sdpa_math or plain_attention) in `dtype` on checked_slice: out and, given
    dout, dq, dk and dv by autograd. In query-row chunks of at most chunk_bytes of scores,
    exact for out and dq (the softmax is per row); dk and dv, sums over the rows, are added
    up over the chunks in float32. Returns (seqlen, heads, head_dim) tensors in `dtype`
    (float32: the reference; the inputs' dtype: the plain attention of FlashAttention's
    rule)."""
    q, k, v = (checked_slice(x).to(dtype).transpose(0, 1).unsqueeze(0) for x in inputs)
    grad = checked_slice(dout).to(dtype).transpose(0, 1).unsqueeze(0) if dout is not None else None
    k, v = k.requires_grad_(grad is not None), v.requires_grad_(grad is not None)
    seqlen = q.size(2)
    rows_per_chunk = max(1, chunk_bytes // (q.element_size() * q.size(1) * k.size(2)))
    outs, dqs = [], []
    dk, dv = torch.zeros_like(k, dtype=torch.float32), torch.zeros_like(v, dtype=torch.float32)
    with no_tf32(), torch.set_grad_enabled(grad is not None):
        for start in range(0, seqlen, rows_per_chunk):
            stop = min(seqlen, start + rows_per_chunk)
            rows = q[:, :, start:stop].detach().requires_grad_(grad is not None)
            mask = None
            if causal:  # query i (absolute) sees keys j <= i
                positions = torch.arange(start, stop, device=q.device).unsqueeze(1)
                mask = torch.arange(k.size(2), device=q.device).unsqueeze(0) <= positions
            out = attend(rows, k, v, mask)
            outs.append(out.detach())
            if grad is not None:
                d_rows, d_k, d_v = torch.autograd.grad(out, (rows, k, v), grad[:, :, start:stop])
                dqs.append(d_rows)
                dk += d_k
                dv += d_v

    def bshd(x: "torch.Tensor") -> "torch.Tensor":
        return x[0].transpose(0, 1).to(dtype)

    result = {"out": bshd(torch.cat(outs, dim=2))}
    if grad is not None:
        result.update(dq=bshd(torch.cat(dqs, dim=2)), dk=bshd(dk), dv=bshd(dv))
    return result


def references_for(shape: Shape, inputs: Inputs,
                   dout: Optional["torch.Tensor"]) -> dict[str, "torch.Tensor"]:
    """The float32 reference of what the check compares for the shape's direction: out
    (fwd), dq, dk, dv (bwd), all four (fwdbwd)."""
    return outputs_of_direction(shape.direction, attention_reference(
        inputs, dout if shape.direction != "fwd" else None, shape.causal, torch.float32,
        REFERENCE_CHUNK_BYTES, sdpa_math))


def plain_errors(shape: Shape, inputs: Inputs, dout: Optional["torch.Tensor"],
                 references: Mapping[str, "torch.Tensor"]) -> dict[str, float]:
    """max |plain - reference| per output: the plain attention in the inputs' dtype, whose
    errors FlashAttention's rule doubles into each system's bound."""
    plain = outputs_of_direction(shape.direction, attention_reference(
        inputs, dout if shape.direction != "fwd" else None, shape.causal, inputs[0].dtype,
        PLAIN_CHUNK_BYTES, plain_attention))
    errors = {}
    for name, reference in references.items():
        error = (plain[name].float() - reference).abs().max().item()
        errors[name] = error if math.isfinite(error) else math.inf
    return errors


def outputs_of_direction(direction: str,
                         outputs: dict[str, "torch.Tensor"]) -> dict[str, "torch.Tensor"]:
    """The outputs a direction's check compares: out (fwd), dq, dk, dv (bwd), all four
    (fwdbwd)."""
    names = {"fwd": ("out",), "bwd": GRADIENTS, "fwdbwd": ("out", *GRADIENTS)}[direction]
    return {name: outputs[name] for name in names}


def system_outputs(system: System, direction: str, inputs: Inputs,
                   dout: Optional["torch.Tensor"], causal: bool) -> dict[str, "torch.Tensor"]:
    """One run of what the direction times, named as references_for names the references."""
    if direction == "fwd":
        return {"out": system.call(*inputs, causal)}
    if system.prepare is None or system.backward is None:
        raise NotImplementedError(f"{system.key} has no backward")
    forward = system.prepare(*inputs, causal)
    given = ({name: torch.full_like(x, math.nan) for name, x in zip(GRADIENTS, inputs)}
             if system.takes_outputs else {})
    outputs = dict(zip(GRADIENTS, system.backward(forward, dout, **given)))
    if direction == "fwdbwd":
        outputs["out"] = forward.out.detach()
    return outputs


def max_abs_difference(out_bshd: "torch.Tensor", reference: "torch.Tensor") -> float:
    difference = (checked_slice(out_bshd).float() - reference).abs().max().item()
    return difference if math.isfinite(difference) else math.inf


def rule_tolerance(plain_error: float) -> float:
    """FlashAttention's bound on a system's error; a plain error that is not finite bounds
    nothing (0: every system is wrong, and the reason shows the plain error)."""
    return RULE_FACTOR * plain_error + RULE_SLACK if math.isfinite(plain_error) else 0.0


def fa3_workspace_sizes(inputs: Inputs, causal: bool) -> list[int]:
    """The bytes of fa3.backward's workspace in both reduction orders (the scratch it takes
    from the caching allocator), or none where this fa3 has no backward."""
    q, k, _ = inputs
    try:
        return [fa3.backward_workspace_size(q, k, causal=causal, deterministic=deterministic)
                for deterministic in (False, True)]
    except (RuntimeError, NotImplementedError, fa3.LibraryNotFoundError):
        return []


def poison_allocator(tensors: Sequence["torch.Tensor"], extra_bytes: Sequence[int] = ()) -> None:
    """Fills the caching allocator's free blocks of the outputs' sizes with NaN: POISON_COPIES
    NaN tensors of each size (and of each extra byte count, e.g. fa3's workspace) are made
    and freed, so the outputs and scratch a system allocates next come from NaN blocks rather
    than from the previous system's gradients."""
    blocks = []
    for tensor in tensors:
        blocks += [torch.full_like(tensor, math.nan) for _ in range(POISON_COPIES)]
    for nbytes in extra_bytes:
        blocks += [torch.full((max(1, nbytes // 4),), math.nan, device=tensors[0].device)
                   for _ in range(POISON_COPIES)]
    torch.cuda.synchronize()
    del blocks


# ---- timing -------------------------------------------------------------------------------


def hold_seconds(calls: int, host_seconds_per_call: float) -> float:
    """How long the GPU spins before `calls` queued calls: long enough for the host to queue
    every one of them before the GPU reaches them."""
    return min(MAX_HOLD_SECONDS,
               max(MIN_HOLD_SECONDS, calls * max(3 * host_seconds_per_call, 100e-6)))


def hold_gpu(seconds: float) -> None:
    """Queues a spin kernel so the calls queued after it start back to back on the GPU."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(seconds * ASSUMED_CLOCK_HZ))


def time_calls(step: Callable[[int], Any], iters: int, warmup: int,
               context: Callable[[], ContextManager[Any]] = contextlib.nullcontext
               ) -> list[float]:
    """Milliseconds of each of `iters` calls step(first + i), each between two CUDA events,
    after step(0), ..., step(first - 1) untimed, first = max(1, warmup): one untimed call
    at least (the host's time per call), and the timed ones on the sets after it (the
    callers' steps use input set n mod the number of sets), not on one it left in L2."""
    warmup = max(1, warmup)
    with context():
        host_seconds = []
        for i in range(warmup):
            started = time.perf_counter()
            step(i)
            host_seconds.append(time.perf_counter() - started)
        torch.cuda.synchronize()
        per_call = statistics.median(host_seconds[1:] or host_seconds)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        collecting = gc.isenabled()
        gc.disable()
        try:
            hold_gpu(hold_seconds(iters, per_call))
            for i in range(iters):
                starts[i].record()
                step(warmup + i)
                ends[i].record()
        finally:
            if collecting:
                gc.enable()
        torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)]


def time_system(system: System, sets: list[Inputs], causal: bool, iters: int,
                warmup: int) -> list[float]:
    """Milliseconds of each of `iters` forward calls, rotating over the input sets."""
    return time_calls(lambda n: system.call(*sets[n % len(sets)], causal), iters, warmup,
                      system.context)


def time_direction(system: System, shape: Shape, sets: list[Inputs],
                   douts: list["torch.Tensor"], iters: int, warmup: int,
                   prepared: Optional[dict[str, list[Forward]]] = None) -> list[float]:
    """Milliseconds of each of `iters` calls of what shape.direction times (module
    docstring): bwd runs the system's forward once per input set first, outside the timed
    region (kept in `prepared` across rounds), and times the backward alone."""
    if shape.direction == "fwd":
        return time_system(system, sets, shape.causal, iters, warmup)
    if system.prepare is None or system.backward is None:
        raise NotImplementedError(f"{system.key} has no backward")
    prepare, backward, count = system.prepare, system.backward, len(sets)
    if shape.direction == "bwd":
        prepared = {} if prepared is None else prepared
        if system.key not in prepared:
            with system.context():
                prepared[system.key] = [prepare(q, k, v, shape.causal) for q, k, v in sets]
            torch.cuda.synchronize()
        forwards = prepared[system.key]
        return time_calls(lambda n: backward(forwards[n % count], douts[n % count]), iters,
                          warmup, system.context)
    return time_calls(lambda n: backward(prepare(*sets[n % count], shape.causal),
                                         douts[n % count]), iters, warmup, system.context)


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# ---- one shape ------------------------------------------------------------------------------


@dataclass
class Cell:
    shape: Shape
    system: System
    status: str = "ok"          # ok | wrong | unavailable
    reason: str = ""
    max_diff: float = math.nan    # the checked output nearest its tolerance: its difference
    tolerance: float = math.nan   # and its tolerance
    diffs: dict[str, float] = field(default_factory=dict)       # per output: out, dq, dk, dv
    tolerances: dict[str, float] = field(default_factory=dict)
    plain: dict[str, float] = field(default_factory=dict)  # the plain attention's errors
    unrepeated: list[str] = field(default_factory=list)    # deterministic: outputs that differed
    times_ms: list[float] = field(default_factory=list)

    def ms(self, fraction: float) -> float:
        return percentile(self.times_ms, fraction) if self.times_ms else math.nan

    def tflops(self, fraction: float = 0.5) -> float:
        """TFLOPS at a time percentile (the p10 time gives the p90 TFLOPS)."""
        milliseconds = self.ms(fraction)
        return self.shape.flops / (milliseconds * 1e-3) / 1e12 if milliseconds > 0 else math.nan


def round_shares(iters: int, rounds: int, systems: int = 1) -> list[int]:
    """The calls of each of a shape's timed rounds: the same number in every round, iters /
    rounds rounded up (a longer round would give the system that opens it more calls in
    first place); and with at least as many rounds as `systems` (those timed in the shape),
    the rounds rounded up to a multiple of them, so that each takes each place equally often
    in the cell even when the check, a backend or a missing anchor left one out. Fewer rounds
    than systems rotate their first place over the grid instead (round_orders' start)."""
    rounds = max(1, min(rounds, iters))
    per_round = -(-iters // rounds)
    if systems > 1 and rounds >= systems:
        rounds = -(-rounds // systems) * systems
    return [per_round] * rounds


def rotated(items: list, shift: int) -> list:
    """items starting at position shift (mod len): round r's order of the systems."""
    shift %= max(1, len(items))
    return items[shift:] + items[:shift]


def round_orders(count: int, rounds: int, start: int = 0) -> list[list[int]]:
    """The systems' order (indices) in each round: the order given, rotated by one more
    position each round, beginning with rotation `start` (the shape's index, so that with
    fewer rounds than systems the first place still goes round over the grid). With a
    multiple of `count` rounds every system takes every place equally often."""
    return [rotated(list(range(count)), start + r) for r in range(rounds)]


def measure_shape(shape: Shape, systems: list[System], dtype_name: str,
                  device: "torch.device", iters: int, warmup: int, rounds: int = 1,
                  start: int = 0) -> list[Cell]:
    cells = [Cell(shape, system) for system in systems]
    try:
        sets = make_input_sets(shape, DTYPES[dtype_name], device)
        # The incoming gradients of the backward: one per input set, like the set's out.
        douts = [torch.randn_like(q) for q, _, _ in sets] if shape.direction != "fwd" else []
    except torch.cuda.OutOfMemoryError as error:
        for cell in cells:
            cell.status, cell.reason = "unavailable", f"inputs: {first_line(error)}"
        return cells
    dout = douts[0] if douts else None
    references = references_for(shape, sets[0], dout)
    plain = plain_errors(shape, sets[0], dout, references)
    check_outputs(cells, sets[0], references, plain, dout)
    del references
    prepared: dict[str, list[Forward]] = {}  # bwd: each system's forwards, across rounds
    # The rotation is over the systems that passed the check: with one left out, a rotation
    # over every system would put some of the others first more often than the rest.
    timed = [cell for cell in cells if cell.status == "ok"]
    shares = round_shares(iters, rounds, len(timed))
    for share, order in zip(shares, round_orders(len(timed), len(shares), start)):
        for cell in (timed[index] for index in order):
            if cell.status != "ok":  # unavailable since an earlier round
                continue
            try:
                cell.times_ms += time_direction(cell.system, shape, sets, douts, share, warmup,
                                                prepared)
            except (RuntimeError, NotImplementedError, fa3.Fa3Error) as error:
                cell.status, cell.reason = "unavailable", f"timing: {first_line(error)}"
                cell.times_ms = []
                prepared.pop(cell.system.key, None)
    del sets, douts, dout, prepared
    torch.cuda.empty_cache()
    return cells


def check_outputs(cells: list[Cell], inputs: Inputs, references: Mapping[str, "torch.Tensor"],
                  plain: Mapping[str, float], dout: Optional["torch.Tensor"] = None) -> None:
    """Runs each system on inputs (and dout, for the backward) and marks the unavailable and
    the wrong ones: each output (out, dq, dk, dv: the references' names) is held to
    FlashAttention's rule with the plain attention's error on it (`plain`), and one over it
    makes the cell wrong. What a system allocates starts as NaN (poison_allocator; fa3's
    outputs are given NaN-filled); a deterministic system runs twice and must repeat its bits."""
    direction = cells[0].shape.direction if cells else "fwd"
    causal = cells[0].shape.causal if cells else False
    scratch = [] if dout is None else fa3_workspace_sizes(inputs, causal)
    for cell in cells:
        try:
            poison_allocator(inputs, scratch)
            outputs = cell.system.guarded(system_outputs, cell.system, direction, inputs, dout,
                                          cell.shape.causal)
            torch.cuda.synchronize()
            for name, reference in references.items():
                cell.diffs[name] = max_abs_difference(outputs[name], reference)
                cell.tolerances[name] = rule_tolerance(plain[name])
            cell.plain = dict(plain)
            if cell.system.deterministic:
                poison_allocator(inputs, scratch)
                again = cell.system.guarded(system_outputs, cell.system, direction, inputs, dout,
                                            cell.shape.causal)
                torch.cuda.synchronize()
                cell.unrepeated = [name for name in references
                                   if not torch.equal(outputs[name], again[name])]
                del again
            del outputs
        except Unavailable as reason:
            cell.status, cell.reason = "unavailable", str(reason)
        except torch.cuda.OutOfMemoryError as error:
            cell.status, cell.reason = "unavailable", first_line(error)
    for cell in cells:
        if cell.status == "ok" and cell.diffs:
            judge_cell(cell)


def share_of_tolerance(difference: float, tolerance: float) -> float:
    if tolerance > 0:
        return difference / tolerance
    return 0.0 if difference == 0 else math.inf


def judge_cell(cell: Cell) -> None:
    """Sets max_diff/tolerance to the output nearest its tolerance, and marks the cell wrong
    (naming every output over its tolerance) when one is over it."""
    worst = max(cell.diffs, key=lambda n: share_of_tolerance(cell.diffs[n], cell.tolerances[n]))
    cell.max_diff, cell.tolerance = cell.diffs[worst], cell.tolerances[worst]
    over = [name for name in cell.diffs if not cell.diffs[name] <= cell.tolerances[name]]
    reasons = [f"max |{name} - fp32 ref| = {cell.diffs[name]:.3g} > tolerance "
               f"{cell.tolerances[name]:.3g} ({RULE_FACTOR:g} x plain "
               f"{cell.plain.get(name, math.nan):.3g} + {RULE_SLACK:g})" for name in over]
    if cell.unrepeated:
        reasons.append(f"{', '.join(cell.unrepeated)} differ between two deterministic runs")
    if reasons:
        cell.status = "wrong"
        cell.reason = "; ".join(reasons)


# ---- time budget ----------------------------------------------------------------------------

# The estimate's model (docs/bench.md, "Side by side"); the run prints its real time at the
# end, to check it against.
ESTIMATE_STARTUP_SECONDS = 20.0  # import torch, CUDA context, libraries, public FA3's import
# Per shape and dtype: inputs, the fp32 reference (with its autograd backward for bwd and
# fwdbwd), the checked calls, empty_cache.
ESTIMATE_SHAPE_SECONDS = {"fwd": 0.3, "bwd": 0.6, "fwdbwd": 0.6}
ESTIMATE_ROUND_SECONDS = 0.015   # per system and round on top of the hold: syncs, events
ESTIMATE_HOST_CALL_SECONDS = 100e-6  # host cost of a call, for the hold (public FA3: most)
# TFLOPS (by the direction's count) below every system's grid average: forward 300 (the
# 512 cells: 300-450); the backwards run slower than the forwards (the public FA3 and cuDNN
# 350-600 on an H200 from 1k, shared/ANCHORS.md), so 200, and 220 for both.
ESTIMATE_TFLOPS = {"fwd": 300.0, "bwd": 200.0, "fwdbwd": 220.0}
ESTIMATE_INPUT_SETS = 2  # the paper grid's sets: each tensor is 64 MiB, a set 3x that > 2x L2


def estimate_seconds(shapes: Sequence[Shape], dtypes: int, systems: int, iters: int,
                     warmup: int, rounds: int) -> float:
    """A generous estimate of a run's wall time: per shape, the fixed cost plus, for every
    system, its checked call, each round's hold and overhead, and its calls at
    ESTIMATE_TFLOPS of the shape's direction; bwd adds the untimed forwards (the check's
    and one per input set) at the forward's rate."""
    shares = round_shares(iters, rounds, systems)
    calls = 1 + len(shares) * max(1, warmup) + sum(shares)
    per_system_rounds = sum(hold_seconds(share, ESTIMATE_HOST_CALL_SECONDS)
                            + ESTIMATE_ROUND_SECONDS for share in shares)
    total = ESTIMATE_STARTUP_SECONDS
    for shape in shapes:
        gpu = calls * shape.flops / (ESTIMATE_TFLOPS[shape.direction] * 1e12)
        if shape.direction == "bwd":
            gpu += ((1 + ESTIMATE_INPUT_SETS) * shape.forward_flops
                    / (ESTIMATE_TFLOPS["fwd"] * 1e12))
        total += dtypes * (ESTIMATE_SHAPE_SECONDS[shape.direction]
                           + systems * (per_system_rounds + gpu))
    return total


# ---- report -------------------------------------------------------------------------------


def describe_cell(cell: Cell) -> str:
    if cell.status == "ok":
        if len(cell.diffs) > 1:  # the backward's: each gradient's
            diffs = " ".join(f"{name} {value:.1e}" for name, value in cell.diffs.items())
        else:
            diffs = f"{cell.max_diff:.1e}"
        return (f"{cell.tflops():7.1f} TFLOPS [{cell.tflops(0.9):.0f}-{cell.tflops(0.1):.0f}] "
                f"diff {diffs}")
    if cell.status == "wrong":
        return f"WRONG ({cell.reason})"
    return f"n/a ({cell.reason[:90]})"


def ratio_value(cells: list[Cell], numerator: str, denominator: str) -> float:
    """Median TFLOPS of one system over another's; NaN unless both ran correctly."""
    by_key = {c.system.key: c for c in cells}
    a, b = by_key.get(numerator), by_key.get(denominator)
    if a and b and a.status == b.status == "ok":
        return a.tflops() / b.tflops()
    return math.nan


def ratio(cells: list[Cell], numerator: str, denominator: str) -> str:
    value = ratio_value(cells, numerator, denominator)
    return "-" if math.isnan(value) else f"{value:.2f}x"


def active_ratios(keys: Sequence[str]) -> list[tuple[str, str, str]]:
    """The RATIOS whose two systems both run."""
    return [r for r in RATIOS if r[0] in keys and r[1] in keys]


def print_shape(cells: list[Cell], dtype_name: str) -> None:
    shape = cells[0].shape
    ratios = active_ratios([c.system.key for c in cells])
    shown = "  ".join(f"{heading} {ratio(cells, a, b)}" for a, b, heading in ratios)
    print(f"{dtype_name} seqlen {shape.seqlen:>5}  {shape.config:<11} batch {shape.batch:>2} "
          f"heads {shape.heads:>2}  {shape.flops / 1e12:7.3f} TFLOP  {shown}")
    for cell in cells:
        print(f"    {cell.system.label:<20} {describe_cell(cell)}")
    sys.stdout.flush()


def print_summary(all_cells: list[list[Cell]], systems: list[System], seqlens: list[int],
                  dtype_name: str) -> None:
    """A grid like shared/ANCHORS.md: one row per config, one column per seqlen, each cell
    the systems' median TFLOPS separated by '/' ('X': wrong, '-': not run)."""
    labels = "/".join(s.key for s in systems)
    ratios = active_ratios([s.key for s in systems])
    direction = all_cells[0][0].shape.direction if all_cells else "fwd"
    print(f"\n## {DIRECTION_TITLES[direction]}, {dtype_name}, TFLOPS ({labels})")
    print("| config | " + " | ".join(seqlen_label(s) for s in seqlens) + " | "
          + "".join(f"{heading} | " for _, _, heading in ratios).rstrip())
    print("|---" * (len(seqlens) + 1 + len(ratios)) + "|")
    configs: dict[str, dict[int, list[Cell]]] = {}
    for cells in all_cells:
        configs.setdefault(cells[0].shape.config, {})[cells[0].shape.seqlen] = cells
    for config, by_seqlen in configs.items():
        row = [summary_cell(by_seqlen.get(s)) for s in seqlens]
        columns = [" ".join(ratio(by_seqlen[s], a, b) for s in seqlens if s in by_seqlen)
                   for a, b, _ in ratios]
        print(f"| {config} | " + " | ".join(row + columns) + " |")


def summary_cell(cells: Optional[list[Cell]]) -> str:
    if not cells:
        return ""
    marks = {"wrong": "X", "unavailable": "-"}
    return "/".join(f"{c.tflops():.0f}" if c.status == "ok" else marks[c.status] for c in cells)


def seqlen_label(seqlen: int) -> str:
    return f"{seqlen // 1024}k" if seqlen % 1024 == 0 else str(seqlen)


# direction last, so the forward's columns keep their places for the readers of older runs.
CSV_COLUMNS = ["gpu", "dtype", "seqlen", "head_dim", "causal", "batch", "heads", "system",
               "status", "median_ms", "p10_ms", "p90_ms", "tflops", "tflops_p10",
               "tflops_p90", "max_abs_diff", "tolerance", "reason", "direction"]


def write_csv(path: str, all_cells: list[list[Cell]], gpu: str,
              dtype_names: Sequence[str]) -> None:
    """One row per system and shape; all_cells[i] was measured in dtype_names[i]."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for cells, dtype_name in zip(all_cells, dtype_names):
            for cell in cells:
                s = cell.shape
                writer.writerow({
                    "gpu": gpu, "dtype": dtype_name, "seqlen": s.seqlen,
                    "head_dim": s.head_dim, "causal": int(s.causal), "batch": s.batch,
                    "heads": s.heads, "system": cell.system.key, "status": cell.status,
                    "median_ms": f"{cell.ms(0.5):.5f}", "p10_ms": f"{cell.ms(0.1):.5f}",
                    "p90_ms": f"{cell.ms(0.9):.5f}", "tflops": f"{cell.tflops():.2f}",
                    # the p10 TFLOPS comes from the p90 time
                    "tflops_p10": f"{cell.tflops(0.9):.2f}",
                    "tflops_p90": f"{cell.tflops(0.1):.2f}",
                    "max_abs_diff": f"{cell.max_diff:.4g}", "tolerance": f"{cell.tolerance:.4g}",
                    "reason": cell.reason, "direction": s.direction,
                })


# ---- side-by-side tables (one per dtype) ----------------------------------------------------


def column_name(key: str) -> str:
    return key.replace("-", "_")


def ratio_column(numerator: str, denominator: str) -> str:
    """this_over_prev, this_over_public, fa3_over_cudnn."""
    names = {"fa3": "this", "fa3-lse": "lse", "fa3-det": "det", "fa3-prev": "prev",
             "fa3-prev-det": "prev_det", "fa3-public": "public"}
    if denominator in ("fa3-prev", "fa3-prev-det", "fa3-public"):
        return f"{names[numerator]}_over_{names[denominator]}"
    return f"{column_name(numerator)}_over_{column_name(denominator)}"


def wide_columns(keys: Sequence[str]) -> list[str]:
    columns = ["gpu", "dtype", "head_dim", "causal", "batch", "seqlen", "heads"]
    for key in keys:
        name = column_name(key)
        columns += [f"{name}_tflops", f"{name}_median_ms", f"{name}_p10_ms", f"{name}_p90_ms",
                    f"{name}_status", f"{name}_max_abs_diff"]
    columns += [ratio_column(a, b) for a, b, _ in active_ratios(keys)]
    return columns + ["reasons"]


def wide_row(cells: list[Cell], gpu: str, dtype_name: str) -> dict[str, str]:
    s = cells[0].shape
    row = {"gpu": gpu, "dtype": dtype_name, "head_dim": str(s.head_dim),
           "causal": str(int(s.causal)), "batch": str(s.batch), "seqlen": str(s.seqlen),
           "heads": str(s.heads)}
    for cell in cells:
        name = column_name(cell.system.key)
        ok = cell.status == "ok"
        row[f"{name}_tflops"] = f"{cell.tflops():.2f}" if ok else ""
        row[f"{name}_median_ms"] = f"{cell.ms(0.5):.5f}" if ok else ""
        row[f"{name}_p10_ms"] = f"{cell.ms(0.1):.5f}" if ok else ""
        row[f"{name}_p90_ms"] = f"{cell.ms(0.9):.5f}" if ok else ""
        row[f"{name}_status"] = cell.status
        row[f"{name}_max_abs_diff"] = f"{cell.max_diff:.4g}"
    for a, b, _ in active_ratios([c.system.key for c in cells]):
        value = ratio_value(cells, a, b)
        row[ratio_column(a, b)] = "" if math.isnan(value) else f"{value:.4f}"
    row["reasons"] = "; ".join(f"{c.system.key}: {c.reason}" for c in cells if c.reason)
    return row


def write_wide_csv(path: Path, all_cells: list[list[Cell]], gpu: str, dtype_name: str) -> None:
    """One row per shape, a group of columns per system, then the ratios."""
    keys = [c.system.key for c in all_cells[0]] if all_cells else []
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=wide_columns(keys))
        writer.writeheader()
        for cells in all_cells:
            writer.writerow(wide_row(cells, gpu, dtype_name))


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def ratio_summary(all_cells: list[list[Cell]], numerator: str, denominator: str,
                  heading: str, min_seqlen: int = 0) -> str:
    """'this/prev from 2k: geomean 1.004 over 24 shapes, min 0.981 (d64 causal 2k), max ...'"""
    every = [(ratio_value(cells, numerator, denominator), cells[0].shape)
             for cells in all_cells if cells[0].shape.seqlen >= min_seqlen]
    pairs = [(value, shape) for value, shape in every if not math.isnan(value)]
    # The shapes where either system was wrong or unavailable are named, not dropped unseen.
    left_out = [f"{shape.config} {seqlen_label(shape.seqlen)}"
                for value, shape in every if math.isnan(value)]
    without = f"; without {', '.join(left_out)} (not both ran correctly)" if left_out else ""
    where = f"from {seqlen_label(min_seqlen)}" if min_seqlen else "all shapes"
    if not pairs:
        return f"{heading}, {where}: no shape where both ran correctly"
    low = min(pairs, key=lambda pair: pair[0])
    high = max(pairs, key=lambda pair: pair[0])
    return (f"{heading}, {where}: geometric mean {geometric_mean([v for v, _ in pairs]):.3f} "
            f"over {len(pairs)} shapes, min {low[0]:.3f} ({low[1].config} "
            f"{seqlen_label(low[1].seqlen)}), max {high[0]:.3f} ({high[1].config} "
            f"{seqlen_label(high[1].seqlen)}){without}")


# The seqlens the ratio summaries start from: all, and the backward's targets' 1k and 2k.
SUMMARY_FROM = {"fwd": (0, 2048), "bwd": (0, 1024, 2048), "fwdbwd": (0, 1024, 2048)}


def markdown_table(all_cells: list[list[Cell]], dtype_name: str, header: Sequence[str]) -> str:
    """The per-dtype table: a row per shape, median TFLOPS per system, then the ratios;
    WRONG / n/a cells name the reason in the last column. header: lines put above it."""
    if not all_cells:
        return ""
    systems = [c.system for c in all_cells[0]]
    keys = [s.key for s in systems]
    ratios = active_ratios(keys)
    labels = "; ".join(f"{s.key} = {s.label}" for s in systems)
    direction = all_cells[0][0].shape.direction
    lines = [f"## {DIRECTION_TITLES[direction]}, {dtype_name}, median TFLOPS ({labels})", ""]
    lines += [f"{line}  " for line in header] + ([""] if header else [])
    columns = (["config", "seqlen", "batch", "heads"] + keys
               + [heading for _, _, heading in ratios] + ["notes"])
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(columns) - 3) + ["---"]) + "|")
    marks = {"wrong": "WRONG", "unavailable": "n/a"}
    for cells in all_cells:
        s = cells[0].shape
        values = [f"{c.tflops():.1f}" if c.status == "ok" else marks[c.status] for c in cells]
        shown = []
        for a, b, _ in ratios:
            value = ratio_value(cells, a, b)
            shown.append("-" if math.isnan(value) else f"{value:.3f}")
        notes = "; ".join(f"{c.system.key}: {c.reason[:80]}" for c in cells if c.reason)
        lines.append("| " + " | ".join([s.config, seqlen_label(s.seqlen), str(s.batch),
                                         str(s.heads)] + values + shown + [notes]) + " |")
    if ratios:
        lines.append("")
        for a, b, heading in ratios:
            for min_seqlen in SUMMARY_FROM[direction]:
                lines.append(f"- {ratio_summary(all_cells, a, b, heading, min_seqlen)}")
    return "\n".join(lines) + "\n"


def draw_figure(path: str, all_cells: list[list[Cell]], systems: list[System],
                head_dims: list[int], causals: list[bool], title: str) -> None:
    """The paper's figure: TFLOPS vs seqlen, a panel per (head_dim, causal), a line per
    system (only its measured, correct points)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = len(head_dims), len(causals)
    figure, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.8 * rows), squeeze=False)
    for r, head_dim in enumerate(head_dims):
        for c, causal in enumerate(causals):
            axis = axes[r][c]
            panel = [cells for cells in all_cells
                     if cells[0].shape.head_dim == head_dim and cells[0].shape.causal == causal]
            for index, system in enumerate(systems):
                points = [(cells[index].shape.seqlen, cells[index].tflops()) for cells in panel
                          if cells[index].status == "ok"]
                if points:
                    xs, ys = zip(*sorted(points))
                    axis.plot(xs, ys, marker="o", label=system.label)
            seqlens = sorted({cells[0].shape.seqlen for cells in panel})
            axis.set_xscale("log", base=2)
            axis.set_xticks(seqlens, [seqlen_label(s) for s in seqlens])
            axis.set_title(f"head dim {head_dim}, {'causal' if causal else 'non-causal'}")
            axis.set_xlabel("sequence length")
            axis.set_ylabel("TFLOPS")
            axis.set_ylim(bottom=0)
            axis.grid(alpha=0.3)
            axis.legend(fontsize=8, loc="lower right")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    print(f"wrote {path}")


def table_stem(direction: str, dtype_name: str) -> str:
    """side_by_side_bf16 (the forward's, as before), side_by_side_bwd_bf16, ..."""
    if direction == "fwd":
        return f"side_by_side_{dtype_name}"
    return f"side_by_side_{direction}_{dtype_name}"


def per_dtype_path(path: str, dtype_name: str, several: bool) -> str:
    """out.png -> out_fp16.png when a run covers several dtypes."""
    if not several:
        return path
    stem, suffix = os.path.splitext(path)
    return f"{stem}_{dtype_name}{suffix}"


# ---- environment ----------------------------------------------------------------------------


def nvidia_smi_clocks() -> Optional[str]:
    if shutil.which("nvidia-smi") is None:
        return None
    query = ("name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,"
             "temperature.gpu,pstate")
    try:
        result = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"],
                                capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return f"nvidia-smi failed: {error}"
    return result.stdout.strip() or result.stderr.strip()


def describe_library(name: str, path: Callable[[], str], kernels: Callable[[], list]) -> str:
    try:
        return f"{name}: {path()} ({len(kernels())} kernels)"
    except fa3.LibraryNotFoundError as error:
        return f"{name}: not available: {error}"


def print_environment(device: "torch.device", args: argparse.Namespace,
                      prev: Optional["fa3.Binding"]) -> list[str]:
    """Prints what the run measures on and how; returns the lines the tables repeat."""
    properties = torch.cuda.get_device_properties(device)
    lines = [f"GPU: {properties.name} (sm_{properties.major}{properties.minor}, "
             f"{properties.multi_processor_count} SMs, {properties.total_memory / 2**30:.0f} "
             f"GiB, L2 {l2_cache_bytes(device) >> 20} MiB)",
             f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
             f"cuDNN {torch.backends.cudnn.version()}"]
    current_flash = getattr(torch.nn.attention, "current_flash_attention_impl", None)
    if current_flash is not None and "flash" in args.systems:
        lines.append(f"SDPA flash backend implementation: {current_flash() or 'FA2 (built in)'}")
    if "fa3" in args.systems:
        lines.append(describe_library("fa3 (this build)", fa3.library_path, fa3.kernels))
    if prev is not None:
        lines.append(describe_library("fa3-prev", prev.library_path, prev.kernels))
    if "fa3-public" in args.systems:
        lines.append(f"fa3-public: {flash_attn_interface.__file__}")
    lines.append(f"systems {','.join(args.systems)}; dtype {','.join(args.dtype)}; "
                 f"{args.iters} timed calls in {args.rounds} round(s), the order of the systems "
                 f"rotating, {args.warmup} warm-up calls before each; median with p10-p90 in "
                 f"brackets")
    lines.append(f"direction {args.direction}: {DIRECTION_TIMED[args.direction]}; TFLOPS: the "
                 f"forward's 4*B*H*S^2*D (halved for causal) x "
                 f"{DIRECTION_FLOP_FACTOR[args.direction]:g}")
    for line in lines:
        print(line)
    print(f"layouts: {LAYOUTS}")
    clocks = nvidia_smi_clocks()
    if clocks:
        print("nvidia-smi before:\n  " + clocks.replace("\n", "\n  "))
    print()
    return lines


# ---- main ---------------------------------------------------------------------------------


def int_list(text: str) -> list[int]:
    return [int(part) for part in text.replace(" ", "").split(",") if part]


def name_list(text: str) -> list[str]:
    return [part for part in text.replace(" ", "").split(",") if part]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="compare.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlens", type=int_list, default=None,
                        help="comma list (default 512,...,16384; --quick: 1024,4096,16384)")
    parser.add_argument("--hdims", type=int_list, default=[64, 128, 256],
                        help="comma list of head dims (default 64,128,256)")
    parser.add_argument("--causal", type=int_list, default=[0, 1],
                        help="comma list of 0/1 (default 0,1)")
    parser.add_argument("--dtype", type=name_list, default=None,
                        help="bf16, fp16 or both, comma-separated (default bf16; "
                             "--side-by-side: bf16,fp16)")
    parser.add_argument("--direction", choices=DIRECTIONS, default="fwd",
                        help="what a timed call is: fwd the forward (default); bwd the "
                             "backward alone, after one untimed forward per input set (fa3: "
                             "fa3.backward; the others: torch.autograd.grad(out, (q, k, v), "
                             "dout, retain_graph=True)); fwdbwd the forward and its backward. "
                             "TFLOPS: the forward's count x 1, 2.5 or 3.5 (the paper's)")
    parser.add_argument("--iters", type=int, default=None,
                        help="timed calls (default 30; --quick: 10; --side-by-side: 10 a round)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="warm-up calls before each round (default 5; --quick: 3)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds the timed calls are split into, the systems' order "
                             "rotating from round to round (default: the least multiple of the "
                             "number of systems from 3; --side-by-side: twice the number of "
                             "systems; 1: the order given)")
    parser.add_argument("--quick", action="store_true",
                        help="seqlens 1k/4k/16k, 10 timed calls, 3 warm-up calls")
    parser.add_argument("--systems", type=name_list, default=None,
                        help=f"comma list of {', '.join(SYSTEM_KEYS)} (default "
                             f"{','.join(FORWARD_SYSTEMS)}; "
                             f"--direction bwd or fwdbwd: {','.join(BACKWARD_SYSTEMS)}, "
                             f"fa3-public when importable; "
                             f"--side-by-side: fa3, fa3-lse, fa3-prev with --prev-lib, "
                             f"fa3-public when importable; --side-by-side --direction bwd: "
                             f"{','.join(SIDE_BY_SIDE_BACKWARD_SYSTEMS)}). fa3-lse is "
                             f"forward-only, fa3-det (fa3's deterministic backward) and "
                             f"fa3-prev-det (the previous build's) backward-only")
    parser.add_argument("--side-by-side", action="store_true",
                        help="this build against the previous one (--prev-lib) and the public "
                             "FA3 (--public-fa3): the defaults above, tables in --out-dir")
    parser.add_argument("--prev-lib", metavar="PATH",
                        help="the previous build's libfa3.so: the system fa3-prev")
    parser.add_argument("--public-fa3", metavar="DIR",
                        help="a directory holding the public FA3's flash_attn_interface.py "
                             "(put first on sys.path): the system fa3-public")
    parser.add_argument("--out-dir", metavar="DIR",
                        help="write side_by_side_<dtype>.csv (a row per shape, the systems "
                             "side by side, the ratios) and side_by_side_<dtype>.md there "
                             "(side_by_side_bwd_<dtype>.* for --direction bwd), rewritten "
                             "after every shape")
    parser.add_argument("--csv", help="write every cell to this CSV file (a row per system)")
    parser.add_argument("--png", help="draw the paper-style figure to this PNG file "
                                      "(_<dtype> added with several dtypes)")
    parser.add_argument("--estimate-only", action="store_true",
                        help="print the run's time estimate and exit (no torch, no GPU needed; "
                             "counts the systems as given, before any is left out)")
    args = parser.parse_args(argv)
    # The figure is drawn after every shape was timed: a missing matplotlib would fail the run
    # at its end.
    if args.png and not args.estimate_only and importlib.util.find_spec("matplotlib") is None:
        parser.error(f"--png {args.png} needs matplotlib, which this Python does not have: "
                     "install it, or leave --png out")

    args.seqlens = args.seqlens or (QUICK_SEQLENS if args.quick else DEFAULT_SEQLENS)
    args.dtype = args.dtype or (["bf16", "fp16"] if args.side_by_side else ["bf16"])
    unknown = [d for d in args.dtype if d not in DTYPES]
    if unknown or len(set(args.dtype)) != len(args.dtype):
        parser.error(f"--dtype {','.join(args.dtype)}: each of {', '.join(DTYPES)} at most once")
    args.systems_given = args.systems is not None
    if args.systems is None:
        if args.side_by_side and args.direction != "fwd":
            args.systems = list(SIDE_BY_SIDE_BACKWARD_SYSTEMS)
        elif args.side_by_side:
            args.systems = [key for key in SIDE_BY_SIDE_SYSTEMS
                            if key != "fa3-prev" or args.prev_lib]
        elif args.direction != "fwd":
            args.systems = list(BACKWARD_SYSTEMS)
        else:
            args.systems = list(FORWARD_SYSTEMS)
    unknown = [key for key in args.systems if key not in SYSTEM_KEYS]
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEM_KEYS)}")
    if not args.systems or len(set(args.systems)) != len(args.systems):
        parser.error("--systems must name at least one system, each once")
    forward_only = [key for key in args.systems if key in FORWARD_ONLY_SYSTEMS]
    if args.direction != "fwd" and forward_only:
        parser.error(f"--direction {args.direction}: {', '.join(forward_only)} is forward-only "
                     f"(fa3's backward always follows a forward with the LSE: that is fa3's "
                     f"row); leave it out")
    backward_only = [key for key in args.systems if key in BACKWARD_ONLY_SYSTEMS]
    if args.direction == "fwd" and backward_only:
        parser.error(f"{', '.join(backward_only)} (fa3's deterministic backward) needs "
                     f"--direction bwd or fwdbwd")
    for key in ("fa3-prev", "fa3-prev-det"):
        if key in args.systems and not args.prev_lib:
            parser.error(f"the system {key} needs --prev-lib PATH (the previous libfa3.so)")
    if args.prev_lib and not os.path.isfile(args.prev_lib):
        parser.error(f"--prev-lib {args.prev_lib}: no such file")
    if args.public_fa3 and not os.path.isdir(args.public_fa3):
        parser.error(f"--public-fa3 {args.public_fa3}: no such directory")

    for option, values in (("--seqlens", args.seqlens), ("--hdims", args.hdims),
                           ("--causal", args.causal)):
        if not values or len(set(values)) != len(values):
            parser.error(f"{option} {','.join(map(str, values))}: give each value once")
    if min(args.seqlens) < 1 or min(args.hdims) < 1:
        parser.error("--seqlens and --hdims take positive numbers")
    if not set(args.causal) <= {0, 1}:
        parser.error(f"--causal {','.join(map(str, args.causal))}: 0 (not causal) and/or 1")
    if args.rounds is None:
        # A multiple of the systems' number, so that each is timed first equally often.
        count = len(args.systems)
        args.rounds = (SIDE_BY_SIDE_ROUNDS_PER_SYSTEM * count if args.side_by_side
                       else count * math.ceil(3 / count))
    if args.iters is None:
        if args.side_by_side:
            args.iters = SIDE_BY_SIDE_CALLS_PER_ROUND * args.rounds
        else:
            args.iters = 10 if args.quick else 30
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 5)
    if args.rounds < 1 or args.iters < 1 or args.warmup < 0:
        parser.error("--rounds and --iters must be at least 1, --warmup at least 0")
    return args


def shapes_of(args: argparse.Namespace) -> list[Shape]:
    return [Shape(seqlen, head_dim, bool(causal), direction=args.direction)
            for head_dim in args.hdims for causal in args.causal for seqlen in args.seqlens]


def fail(message: str) -> NoReturn:
    """Ends the run as an argument error does (status 2), before anything was measured."""
    print(f"compare.py: {message}", file=sys.stderr)
    sys.exit(2)


def make_systems(args: argparse.Namespace) -> tuple[list[System], Optional["fa3.Binding"]]:
    """The chosen systems, in --systems order, and the previous build's binding; exits with
    status 2 when one asked for cannot be set up."""
    known = all_systems()
    known["fa3-det"] = fa3_det_system()
    prev = None
    uses_prev = "fa3-prev" in args.systems or "fa3-prev-det" in args.systems
    if uses_prev or "fa3-public" in args.systems:
        known["fa3"] = dataclasses.replace(known["fa3"], label="fa3 (this build)")
    if uses_prev:
        try:
            prev = fa3.open_library(args.prev_lib)
        except fa3.LibraryNotFoundError as error:
            fail(f"--prev-lib: {error}")
        try:
            same = os.path.samefile(prev.library_path(), fa3.library_path())
        except (OSError, fa3.LibraryNotFoundError):
            same = False
        if same:
            fail(f"--prev-lib {args.prev_lib} is this build's library "
                 f"({fa3.library_path()}); give the previous build's")
        known["fa3-prev"] = prev_fa3_system(prev)
        known["fa3-prev-det"] = prev_fa3_det_system(prev)
        lacking = [name for name in fa3.api.BACKWARD_FUNCTIONS if name in prev.library.missing]
        if args.direction != "fwd" and lacking:
            # A build from before the backward pass: forward-only, so it has no column here.
            print(f"fa3-prev left out: {prev.library_path()} has no backward (it does not "
                  f"export {', '.join(lacking)}); --direction fwd times its forward")
            args.systems = [key for key in args.systems
                            if key not in ("fa3-prev", "fa3-prev-det")]
            prev = None
    if "fa3-public" in args.systems:
        why = import_public_fa3(args.public_fa3)
        if not why:
            known["fa3-public"] = public_fa3_system()
        elif args.systems_given or args.public_fa3:
            # Asked for by name or by directory: a run without it would answer another question.
            fail(f"fa3-public: cannot import flash_attn_interface: {why}")
        else:
            print(f"fa3-public left out: cannot import flash_attn_interface ({why}); "
                  f"--public-fa3 DIR names its directory")
            args.systems = [key for key in args.systems if key != "fa3-public"]
    return [known[key] for key in args.systems], prev


def estimate_line(args: argparse.Namespace, systems: int) -> tuple[float, str]:
    shapes = shapes_of(args)
    estimate = estimate_seconds(shapes, len(args.dtype), systems, args.iters, args.warmup,
                                args.rounds)
    return estimate, (f"estimate: {estimate:.0f} s ({estimate / 60:.1f} min) for {len(shapes)} "
                      f"shapes x {len(args.dtype)} dtype(s) x {systems} systems, "
                      f"{args.direction} (docs/bench.md, \"Side by side\")")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.estimate_only:
        print(estimate_line(args, len(args.systems))[1])
        return 0
    started = time.monotonic()
    try:
        import_torch()
    except ImportError as error:
        print(f"compare.py needs PyTorch: {first_line(error)}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("compare.py needs a CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    systems, prev = make_systems(args)
    header = print_environment(device, args, prev)
    gpu = torch.cuda.get_device_properties(device).name
    shapes = shapes_of(args)
    estimate, line = estimate_line(args, len(systems))
    print(line + "\n")
    sys.stdout.flush()
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)

    measured: list[list[Cell]] = []
    measured_dtypes: list[str] = []
    by_dtype: dict[str, list[list[Cell]]] = {}
    for dtype_name in args.dtype:
        for index, shape in enumerate(shapes):
            cells = measure_shape(shape, systems, dtype_name, device, args.iters, args.warmup,
                                  args.rounds, start=index)
            print_shape(cells, dtype_name)
            measured.append(cells)
            measured_dtypes.append(dtype_name)
            by_dtype.setdefault(dtype_name, []).append(cells)
            # Rewritten after every shape: a run cut short by a timeout keeps what it measured.
            if args.csv:
                write_csv(args.csv, measured, gpu, measured_dtypes)
            if args.out_dir:
                write_tables(Path(args.out_dir), by_dtype[dtype_name], gpu, dtype_name, header)

    for dtype_name, all_cells in by_dtype.items():
        print_summary(all_cells, systems, args.seqlens, dtype_name)
        if args.side_by_side:
            print()
            print(markdown_table(all_cells, dtype_name, []), end="")
    clocks = nvidia_smi_clocks()
    if clocks:
        print("\nnvidia-smi after:\n  " + clocks.replace("\n", "\n  "))
    if args.csv:
        print(f"wrote {args.csv}")
    if args.out_dir:
        for dtype_name in by_dtype:
            print(f"wrote {args.out_dir}/{table_stem(args.direction, dtype_name)}.csv and .md")
    if args.png:
        for dtype_name, all_cells in by_dtype.items():
            title = f"Attention {DIRECTION_TITLES[args.direction].lower()}, {dtype_name}, {gpu}"
            draw_figure(per_dtype_path(args.png, dtype_name, len(by_dtype) > 1), all_cells,
                        systems, args.hdims, [bool(c) for c in args.causal], title)
    print(f"took {time.monotonic() - started:.0f} s (estimate {estimate:.0f} s)")
    return exit_status(measured)


def exit_status(measured: Sequence[Sequence[Cell]]) -> int:
    """1 when a cell of fa3's own systems (this build's or the previous build's, any mode)
    is WRONG, else 0: the other systems are yardsticks, whose failures the tables show."""
    wrong = [f"{cell.system.key} {cell.shape.config} {cell.shape.seqlen}"
             for cells in measured for cell in cells
             if cell.status == "wrong" and cell.system.key.startswith("fa3")
             and cell.system.key != "fa3-public"]
    if wrong:
        print(f"compare.py: WRONG: {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


def write_tables(directory: Path, all_cells: list[list[Cell]], gpu: str, dtype_name: str,
                 header: Sequence[str]) -> None:
    """side_by_side[_<direction>]_<dtype>.csv and .md (table_stem) in directory."""
    direction = all_cells[0][0].shape.direction if all_cells else "fwd"
    stem = table_stem(direction, dtype_name)
    write_wide_csv(directory / f"{stem}.csv", all_cells, gpu, dtype_name)
    (directory / f"{stem}.md").write_text(markdown_table(all_cells, dtype_name, header))


if __name__ == "__main__":
    sys.exit(main())
