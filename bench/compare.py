#!/usr/bin/env python3
"""fa3 against PyTorch SDPA's cuDNN and FlashAttention-2 backends, forward, one process.

The grid is the FlashAttention-3 paper's (Section 4.1): seqlen 512..16k, batch =
16384 / seqlen, heads = 2048 / head_dim, head_dim 64/128/256, causal off/on; bf16 unless
--dtype fp16. TFLOPS use the paper's formula 4 * batch * heads * seqlen^2 * head_dim,
halved for causal.

Method, the same for every system:
- the same inputs: several sets of (q, k, v) in fa3's layout (batch, seqlen, heads,
  head_dim), enough that one pass over them exceeds twice the L2 cache; calls rotate over
  the sets so no call finds its inputs in L2. SDPA takes (batch, heads, seqlen, head_dim):
  it gets .transpose(1, 2) views of the very same storage (physically BSHD), which both
  of its backends read without a copy.
- before timing, each system's output on set 0 is compared with a float32 SDPA (math
  backend, no TF32) reference on batch 0, the first two heads, every row; a system whose
  max |difference| exceeds its tolerance is marked WRONG and not timed.
- the timed calls come in --rounds rounds (default 3), and the order of the systems rotates
  from one round to the next, so each system is timed first in some round: at 8k-16k the
  system timed first right after the check gained 4-6% on the other on average, up to 11%
  in a cell (an H200, fa3 and cuDNN in both orders): the GPU reaches its power cap during
  the first system's calls (bench/NOTES.md v18). Each round of a system: warm-up calls,
  then its share of the --iters calls, each between two CUDA events on the current stream.
  The GPU is held busy (torch.cuda._sleep) while the calls are queued, so the events
  measure GPU time only, not Python or launch overhead; Python's garbage collector is off
  while they are queued (a collection pause longer than the hold would let the GPU run
  dry, and the calls queued after it would time the host). Median, p10 and p90 over the
  calls of every round are reported.
- a backend that cannot run a shape (PyTorch's reason, e.g. a head dim) is a cell with
  that reason, not a crash.

    python3 bench/compare.py                       # the whole grid, bf16
    python3 bench/compare.py --quick --dtype fp16  # seqlens 1k/4k/16k, fewer iterations
    python3 bench/compare.py --csv out.csv --png out.png
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import math
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR / "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import fa3  # noqa: E402

TOKENS = 16384           # batch * seqlen in the paper's grid
HIDDEN = 2048            # heads * head_dim in the paper's grid
DEFAULT_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
QUICK_SEQLENS = [1024, 4096, 16384]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Unit roundoff of the 16-bit types: the floor of the correctness tolerance.
UNIT_ROUNDOFF = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
TOLERANCE_FACTOR = 4.0
CHECKED_HEADS = 2
REFERENCE_CHUNK_BYTES = 256 << 20   # float32 scores per reference chunk
ASSUMED_CLOCK_HZ = 2.0e9            # to turn a hold time into torch.cuda._sleep cycles
MIN_HOLD_SECONDS = 0.02             # the least hold: a few host hiccups' worth

LAYOUTS = ("fa3: q, k, v, out contiguous (batch, seqlen, heads, head_dim). "
           "SDPA: the same storage as (batch, heads, seqlen, head_dim) views via "
           ".transpose(1, 2) (strides S*H*D, D, H*D, 1); its output is (B, H, S, D).")


# ---- problems -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    seqlen: int
    head_dim: int
    causal: bool
    batch_size: int = 0  # 0: the paper's grid, TOKENS // seqlen
    num_heads: int = 0   # 0: the paper's grid, HIDDEN // head_dim

    @property
    def batch(self) -> int:
        return self.batch_size or max(1, TOKENS // self.seqlen)

    @property
    def heads(self) -> int:
        return self.num_heads or max(1, HIDDEN // self.head_dim)

    @property
    def flops(self) -> float:
        """The paper's count: 4 * B * H * S^2 * D, halved for causal."""
        full = 4.0 * self.batch * self.heads * self.seqlen ** 2 * self.head_dim
        return full / 2 if self.causal else full

    @property
    def config(self) -> str:
        return f"d{self.head_dim}" + (" causal" if self.causal else "")


Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def make_input_sets(shape: Shape, dtype: torch.dtype, device: torch.device) -> list[Inputs]:
    """Enough (q, k, v) sets that one rotation touches more than twice the L2 cache."""
    dims = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)
    set_bytes = 3 * math.prod(dims) * torch.tensor([], dtype=dtype).element_size()
    count = max(2, math.ceil(2 * l2_cache_bytes(device) / set_bytes))
    return [tuple(torch.randn(dims, dtype=dtype, device=device) for _ in range(3))
            for _ in range(count)]


def l2_cache_bytes(device: torch.device) -> int:
    properties = torch.cuda.get_device_properties(device)
    return int(getattr(properties, "L2_cache_size", 0) or 50 << 20)  # H100: 50 MiB


# ---- systems ------------------------------------------------------------------------------


class Unavailable(Exception):
    """A system cannot run this shape; the message says why."""


@dataclass
class System:
    key: str    # short name for CSV and options
    label: str  # what the table and the figure call it
    call: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]
    context: Callable[[], ContextManager[Any]] = contextlib.nullcontext

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        """One call in (batch, seqlen, heads, head_dim); raises Unavailable with the reason."""
        with warnings.catch_warnings(record=True) as caught, self.context():
            warnings.simplefilter("always")
            try:
                return self.call(q, k, v, causal)
            # RuntimeError covers Fa3Error and CUDA out-of-memory; NotImplementedError
            # covers fa3.MissingFunctionError.
            except (RuntimeError, NotImplementedError, fa3.LibraryNotFoundError) as error:
                # SDPA explains why a forced backend cannot run in warnings, then raises.
                reasons = [str(w.message).splitlines()[0] for w in caught]
                raise Unavailable("; ".join(reasons + [first_line(error)])) from error


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def fa3_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return fa3.forward(q, k, v, causal=causal)


def sdpa_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    # Views of our BSHD storage in SDPA's (B, H, S, D); seqlen_q == seqlen_k, so PyTorch's
    # top-left causal mask is the same as fa3's bottom-right one.
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2)


def all_systems() -> dict[str, System]:
    return {
        "fa3": System("fa3", "fa3", fa3_call),
        "cudnn": System("cudnn", "cuDNN (SDPA)", sdpa_call,
                        lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)),
        "flash": System("flash", "FA2 (SDPA flash)", sdpa_call,
                        lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)),
    }


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


def checked_slice(out_bshd: torch.Tensor) -> torch.Tensor:
    """The part of an output the check compares: batch 0, the first heads, every row."""
    return out_bshd[0, :, :CHECKED_HEADS, :]


def reference_fp32(inputs: Inputs, causal: bool) -> torch.Tensor:
    """float32 SDPA (math backend, no TF32) of checked_slice, in query-row chunks so the
    score matrix stays small at 16k; returns (seqlen, heads, head_dim) float32."""
    q, k, v = (checked_slice(x).float().transpose(0, 1).unsqueeze(0) for x in inputs)
    seqlen = q.size(2)
    rows_per_chunk = max(1, REFERENCE_CHUNK_BYTES // (4 * q.size(1) * seqlen))
    pieces = []
    with sdpa_kernel(SDPBackend.MATH), no_tf32():
        for start in range(0, seqlen, rows_per_chunk):
            stop = min(seqlen, start + rows_per_chunk)
            mask = None
            if causal:  # query i (absolute) sees keys j <= i
                rows = torch.arange(start, stop, device=q.device).unsqueeze(1)
                mask = torch.arange(seqlen, device=q.device).unsqueeze(0) <= rows
            pieces.append(F.scaled_dot_product_attention(q[:, :, start:stop], k, v,
                                                         attn_mask=mask))
    return torch.cat(pieces, dim=2)[0].transpose(0, 1)


def max_abs_difference(out_bshd: torch.Tensor, reference: torch.Tensor) -> float:
    difference = (checked_slice(out_bshd).float() - reference).abs().max().item()
    return difference if math.isfinite(difference) else math.inf


def tolerances(diffs: dict[str, float], reference: torch.Tensor,
               dtype: torch.dtype) -> dict[str, float]:
    """A system is wrong when its difference exceeds TOLERANCE_FACTOR times the larger of
    the dtype's rounding of the largest output and the best difference among the *other*
    systems (so one system alone is still judged by the rounding floor)."""
    floor = UNIT_ROUNDOFF[dtype] * reference.abs().max().item()
    result = {}
    for key in diffs:
        others = [d for other, d in diffs.items() if other != key and math.isfinite(d)]
        result[key] = TOLERANCE_FACTOR * max([floor] + ([min(others)] if others else []))
    return result


# ---- timing -------------------------------------------------------------------------------


def hold_gpu(seconds: float) -> None:
    """Queues a spin kernel so the calls queued after it start back to back on the GPU."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(seconds * ASSUMED_CLOCK_HZ))


def time_system(system: System, sets: list[Inputs], causal: bool, iters: int,
                warmup: int) -> list[float]:
    """Milliseconds of each of `iters` calls, rotating over the input sets."""
    with system.context():
        host_seconds = []
        for i in range(max(1, warmup)):
            started = time.perf_counter()
            system.call(*sets[i % len(sets)], causal)
            host_seconds.append(time.perf_counter() - started)
        torch.cuda.synchronize()
        # Long enough for the host to queue every timed call before the GPU reaches them.
        per_call = statistics.median(host_seconds[1:] or host_seconds)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        collecting = gc.isenabled()
        gc.disable()
        try:
            hold_gpu(min(2.0, max(MIN_HOLD_SECONDS, iters * max(3 * per_call, 100e-6))))
            for i in range(iters):
                q, k, v = sets[(warmup + i) % len(sets)]
                starts[i].record()
                system.call(q, k, v, causal)
                ends[i].record()
        finally:
            if collecting:
                gc.enable()
        torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)]


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
    max_diff: float = math.nan
    tolerance: float = math.nan
    times_ms: list[float] = field(default_factory=list)

    def ms(self, fraction: float) -> float:
        return percentile(self.times_ms, fraction) if self.times_ms else math.nan

    def tflops(self, fraction: float = 0.5) -> float:
        """TFLOPS at a time percentile (the p10 time gives the p90 TFLOPS)."""
        milliseconds = self.ms(fraction)
        return self.shape.flops / (milliseconds * 1e-3) / 1e12 if milliseconds > 0 else math.nan


def round_shares(iters: int, rounds: int) -> list[int]:
    """iters timed calls split over the rounds as evenly as they go (no empty round)."""
    rounds = max(1, min(rounds, iters))
    return [iters // rounds + (1 if r < iters % rounds else 0) for r in range(rounds)]


def rotated(items: list, shift: int) -> list:
    """items starting at position shift (mod len): round r's order of the systems."""
    shift %= max(1, len(items))
    return items[shift:] + items[:shift]


def measure_shape(shape: Shape, systems: list[System], dtype: torch.dtype,
                  device: torch.device, iters: int, warmup: int, rounds: int = 1) -> list[Cell]:
    cells = [Cell(shape, system) for system in systems]
    try:
        sets = make_input_sets(shape, dtype, device)
    except torch.cuda.OutOfMemoryError as error:
        for cell in cells:
            cell.status, cell.reason = "unavailable", f"inputs: {first_line(error)}"
        return cells
    reference = reference_fp32(sets[0], shape.causal)
    check_outputs(cells, sets[0], reference, dtype)
    for round_index, share in enumerate(round_shares(iters, rounds)):
        for cell in rotated(cells, round_index):
            if cell.status != "ok":
                continue
            try:
                cell.times_ms += time_system(cell.system, sets, shape.causal, share, warmup)
            except (RuntimeError, fa3.Fa3Error) as error:
                cell.status, cell.reason = "unavailable", f"timing: {first_line(error)}"
                cell.times_ms = []
    del sets, reference
    torch.cuda.empty_cache()
    return cells


def check_outputs(cells: list[Cell], inputs: Inputs, reference: torch.Tensor,
                  dtype: torch.dtype) -> None:
    """Runs each system once on inputs and marks the unavailable and the wrong ones."""
    diffs: dict[str, float] = {}
    for cell in cells:
        try:
            out = cell.system.run(*inputs, cell.shape.causal)
            torch.cuda.synchronize()
            diffs[cell.system.key] = cell.max_diff = max_abs_difference(out, reference)
            del out
        except Unavailable as reason:
            cell.status, cell.reason = "unavailable", str(reason)
        except torch.cuda.OutOfMemoryError as error:
            cell.status, cell.reason = "unavailable", first_line(error)
    limits = tolerances(diffs, reference, dtype)
    for cell in cells:
        if cell.system.key in limits:
            cell.tolerance = limits[cell.system.key]
            if not cell.max_diff <= cell.tolerance:
                cell.status = "wrong"
                cell.reason = (f"max |out - fp32 ref| = {cell.max_diff:.3g} > tolerance "
                               f"{cell.tolerance:.3g}")


# ---- report -------------------------------------------------------------------------------


def describe_cell(cell: Cell) -> str:
    if cell.status == "ok":
        return (f"{cell.tflops():7.1f} TFLOPS [{cell.tflops(0.9):.0f}-{cell.tflops(0.1):.0f}] "
                f"diff {cell.max_diff:.1e}")
    if cell.status == "wrong":
        return f"WRONG ({cell.reason})"
    return f"n/a ({cell.reason[:90]})"


def ratio(cells: list[Cell], numerator: str, denominator: str) -> str:
    by_key = {c.system.key: c for c in cells}
    a, b = by_key.get(numerator), by_key.get(denominator)
    if a and b and a.status == b.status == "ok":
        return f"{a.tflops() / b.tflops():.2f}x"
    return "-"


def print_shape(cells: list[Cell]) -> None:
    shape = cells[0].shape
    print(f"seqlen {shape.seqlen:>5}  {shape.config:<11} batch {shape.batch:>2} "
          f"heads {shape.heads:>2}  {shape.flops / 1e12:7.3f} TFLOP  "
          f"fa3/cuDNN {ratio(cells, 'fa3', 'cudnn')}")
    for cell in cells:
        print(f"    {cell.system.label:<17} {describe_cell(cell)}")
    sys.stdout.flush()


def print_summary(all_cells: list[list[Cell]], systems: list[System], seqlens: list[int],
                  dtype_name: str) -> None:
    """A grid like shared/ANCHORS.md: one row per config, one column per seqlen, each cell
    the systems' median TFLOPS separated by '/' ('X': wrong, '-': not run)."""
    labels = "/".join(s.key for s in systems)
    print(f"\n## Forward, {dtype_name}, TFLOPS ({labels})")
    print("| config | " + " | ".join(seqlen_label(s) for s in seqlens) + " | fa3/cuDNN |")
    print("|---" * (len(seqlens) + 2) + "|")
    configs: dict[str, dict[int, list[Cell]]] = {}
    for cells in all_cells:
        configs.setdefault(cells[0].shape.config, {})[cells[0].shape.seqlen] = cells
    for config, by_seqlen in configs.items():
        row = [summary_cell(by_seqlen.get(s)) for s in seqlens]
        ratios = [ratio(by_seqlen[s], "fa3", "cudnn") for s in seqlens if s in by_seqlen]
        print(f"| {config} | " + " | ".join(row) + f" | {' '.join(ratios)} |")


def summary_cell(cells: Optional[list[Cell]]) -> str:
    if not cells:
        return ""
    marks = {"wrong": "X", "unavailable": "-"}
    return "/".join(f"{c.tflops():.0f}" if c.status == "ok" else marks[c.status] for c in cells)


def seqlen_label(seqlen: int) -> str:
    return f"{seqlen // 1024}k" if seqlen % 1024 == 0 else str(seqlen)


CSV_COLUMNS = ["gpu", "dtype", "seqlen", "head_dim", "causal", "batch", "heads", "system",
               "status", "median_ms", "p10_ms", "p90_ms", "tflops", "tflops_p10",
               "tflops_p90", "max_abs_diff", "tolerance", "reason"]


def write_csv(path: str, all_cells: list[list[Cell]], gpu: str, dtype_name: str) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for cells in all_cells:
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
                    "reason": cell.reason,
                })
    print(f"wrote {path}")


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


def print_environment(device: torch.device, args: argparse.Namespace) -> str:
    properties = torch.cuda.get_device_properties(device)
    gpu = properties.name
    print(f"GPU: {gpu} (sm_{properties.major}{properties.minor}, "
          f"{properties.multi_processor_count} SMs, {properties.total_memory / 2**30:.0f} GiB, "
          f"L2 {l2_cache_bytes(device) >> 20} MiB)")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    current_flash = getattr(torch.nn.attention, "current_flash_attention_impl", None)
    if current_flash is not None:
        print(f"SDPA flash backend implementation: {current_flash() or 'FA2 (built in)'}")
    try:
        print(f"fa3: {fa3.library_path()} ({len(fa3.kernels())} kernels)")
    except fa3.LibraryNotFoundError as error:
        print(f"fa3: not available: {error}")
    print(f"dtype {args.dtype}; {args.iters} timed calls in {args.rounds} round(s), the order "
          f"of the systems rotating, {args.warmup} warm-up calls before each; median with "
          f"p10-p90 in brackets")
    print(f"layouts: {LAYOUTS}")
    clocks = nvidia_smi_clocks()
    if clocks:
        print("nvidia-smi before:\n  " + clocks.replace("\n", "\n  "))
    print()
    return gpu


# ---- main ---------------------------------------------------------------------------------


def int_list(text: str) -> list[int]:
    return [int(part) for part in text.replace(" ", "").split(",") if part]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlens", type=int_list, default=None,
                        help="comma list (default 512,...,16384; --quick: 1024,4096,16384)")
    parser.add_argument("--hdims", type=int_list, default=[64, 128, 256],
                        help="comma list of head dims (default 64,128,256)")
    parser.add_argument("--causal", type=int_list, default=[0, 1],
                        help="comma list of 0/1 (default 0,1)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--iters", type=int, default=None, help="timed calls (default 30)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="warm-up calls before each round (default 5)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds the timed calls are split into, the systems' order "
                             "rotating from round to round (default 3; 1: the order given)")
    parser.add_argument("--quick", action="store_true",
                        help="seqlens 1k/4k/16k, 10 timed calls, 3 warm-up calls")
    parser.add_argument("--systems", default="fa3,cudnn,flash",
                        help="comma list of fa3, cudnn, flash (default all)")
    parser.add_argument("--csv", help="write every cell to this CSV file")
    parser.add_argument("--png", help="draw the paper-style figure to this PNG file")
    args = parser.parse_args(argv)
    args.seqlens = args.seqlens or (QUICK_SEQLENS if args.quick else DEFAULT_SEQLENS)
    args.iters = args.iters or (10 if args.quick else 30)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 5)
    unknown = set(args.systems.split(",")) - set(all_systems())
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {sorted(all_systems())}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("compare.py needs a CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    dtype = DTYPES[args.dtype]
    systems = [all_systems()[key] for key in args.systems.split(",")]
    gpu = print_environment(device, args)
    torch.manual_seed(0)

    shapes = [Shape(seqlen, head_dim, bool(causal)) for head_dim in args.hdims
              for causal in args.causal for seqlen in args.seqlens]
    all_cells = []
    for shape in shapes:
        cells = measure_shape(shape, systems, dtype, device, args.iters, args.warmup,
                              args.rounds)
        print_shape(cells)
        all_cells.append(cells)

    print_summary(all_cells, systems, args.seqlens, args.dtype)
    clocks = nvidia_smi_clocks()
    if clocks:
        print("\nnvidia-smi after:\n  " + clocks.replace("\n", "\n  "))
    if args.csv:
        write_csv(args.csv, all_cells, gpu, args.dtype)
    if args.png:
        title = f"Attention forward, {args.dtype}, {gpu}"
        draw_figure(args.png, all_cells, systems, args.hdims,
                    [bool(c) for c in args.causal], title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
