"""handle=: fa3's functions with a handle of the caller's, e.g. one with a tuning table of its
own (what fa3-tune writes), on a Hopper GPU.

The table here is the built-in one with the bf16 d128 non-causal picks moved: every length
of the forward to the built-in short pick's twin without ``_ls`` (its row sums by FP32 adds,
not by the PV GEMM: other bits for calls without an LSE), and every length of the backward
to the kernel the built-in table keeps for long queries (80-row query blocks, not 64). At 256
queries the two tables pick different kernels, so a call that ignored the handle would run
the built-in pick and be caught. The forward's results are compared bit for bit with the
moved pick named explicitly (fa3.forward(kernel=...)) and with the built-in pick's. The two
backward kernels give the same bits in the deterministic order (their 16-row k-steps are
added in one order whatever the block), so which one ran is read from the profiler's list of
the kernels launched (CUPTI, through torch.profiler).
"""

from __future__ import annotations

import ctypes
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import fa3  # noqa: E402
from fa3 import api  # noqa: E402

BUILT_IN_TABLE = Path(__file__).resolve().parents[2] / "src" / "runtime" / "tuning_table.json"
KEY = {"dtype": "bf16", "head_dim": 128, "causal": False}
SHAPE = (2, 256, 4, 128)  # short queries: the built-in table's first range of the key


def _key_entries(table: dict[str, Any], direction: str) -> list[dict[str, Any]]:
    return [entry for entry in table["entries"]
            if entry["match"]["direction"] == direction
            and all(entry["match"][name] == value for name, value in KEY.items())]


@pytest.fixture
def device(seeded: torch.device) -> torch.device:
    missing = set(fa3._lib.get_library().missing) & {"fa3_backward", "fa3_backward_with_kernel"}
    if missing:  # a stale build: the backward is part of the product
        pytest.fail(f"{fa3.library_path()} has no backward (lacks {', '.join(sorted(missing))})")
    return seeded


@pytest.fixture
def moved_table(tmp_path: Path) -> tuple[Path, dict[str, tuple[str, str]]]:
    """(a table with the key's picks moved, {direction: (built-in short pick, moved pick)})."""
    table = json.loads(BUILT_IN_TABLE.read_text())
    picks = {}
    for direction in ("fwd", "bwd"):
        entries = _key_entries(table, direction)
        assert len(entries) >= 2, f"the built-in table no longer splits the {direction} key"
        short = entries[0]["kernel"]
        if direction == "fwd":
            assert "_ls_" in short, f"the built-in short pick {short} has no _ls twin"
            moved = short.replace("_ls_", "_", 1)
        else:
            moved = entries[-1]["kernel"]
        assert moved != short and moved in fa3.kernels(), moved
        for entry in entries:
            entry["kernel"] = moved
            entry.pop("config", None)  # the old kernel's; the validator holds it to the new
        picks[direction] = (short, moved)
    path = tmp_path / "moved.json"
    path.write_text(json.dumps(table))
    fa3.validate_tuning_table(path)
    return path, picks


def _inputs(device: torch.device) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(*SHAPE, dtype=torch.bfloat16, device=device) for _ in range(3))


def _backward_with_kernel(handle: fa3.Handle, kernel: str, q: torch.Tensor, k: torch.Tensor,
                          v: torch.Tensor, out: torch.Tensor, dout: torch.Tensor,
                          lse: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """fa3_backward_with_kernel in the deterministic order, into NaN-filled gradients."""
    lib = fa3._lib.get_library()
    grads = tuple(torch.full_like(x, float("nan")) for x in (q, k, v))
    descs = [api._to_fa3_tensor(torch, name, x) for name, x in
             (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("dq", grads[0]),
              ("dk", grads[1]), ("dv", grads[2]))]
    params = api._params(False, None, deterministic=True)
    with torch.cuda.device(q.device):
        nbytes = api._workspace_bytes(lib, handle, descs[0], descs[1], params)
        workspace, pointer = api._allocate_workspace(torch, nbytes, q.device)
        stream = torch.cuda.current_stream(q.device).cuda_stream or None
        status = lib.fa3_backward_with_kernel(handle, kernel.encode(), *descs[:5],
                                              lse.data_ptr(), *descs[5:], params, pointer,
                                              nbytes, stream)
        fa3._lib.raise_for_status(lib, status, "fa3_backward_with_kernel")
        torch.cuda.synchronize()
        del workspace
    return grads


def _same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _launched(run: Any) -> set[str]:
    """The names of the CUDA kernels ``run()`` launched, as the profiler saw them."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    names = {event.key for event in prof.key_averages()}
    assert any(name.startswith("fa3_") for name in names), (
        f"the profiler saw no fa3 kernel (CUPTI unavailable?): {sorted(names)[:10]}")
    return names


def test_a_handles_table_picks_the_forward(device: torch.device, moved_table: Any) -> None:
    path, picks = moved_table
    short, moved = picks["fwd"]
    q, k, v = _inputs(device)
    with fa3.Handle(device.index, tuning_table=path) as handle:
        assert fa3.select_kernel(q, k, v) == short
        assert fa3.select_kernel(q, k, v, handle=handle) == moved
        out = fa3.forward(q, k, v, handle=handle, out=torch.full_like(q, float("nan")))
        named = fa3.forward(q, k, v, kernel=moved)
        built_in = fa3.forward(q, k, v)
        with_lse = fa3.forward(q, k, v, return_lse=True, handle=handle)
        torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    assert torch.equal(out, named)
    # The two kernels sum the rows differently, so a handle that was ignored shows.
    assert not torch.equal(out, built_in), (
        f"{short} and {moved} gave the same bits; this test cannot tell them apart")
    # With an LSE both tables run the twin without _ls.
    assert torch.equal(with_lse[0], out)


def test_a_handles_table_picks_the_backward(device: torch.device, moved_table: Any) -> None:
    path, picks = moved_table
    short, moved = picks["bwd"]
    q, k, v = _inputs(device)
    out, lse = fa3.forward(q, k, v, return_lse=True)
    dout = torch.randn_like(out)
    grads: dict[str, Any] = {}
    with fa3.Handle(device.index, tuning_table=path) as handle:
        ran_mine = _launched(lambda: grads.update(mine=fa3.backward(
            q, k, v, out, dout, lse, deterministic=True, handle=handle,
            dq=torch.full_like(q, float("nan")), dk=torch.full_like(k, float("nan")),
            dv=torch.full_like(v, float("nan")))))
        ran_built_in = _launched(lambda: grads.update(built_in=fa3.backward(
            q, k, v, out, dout, lse, deterministic=True)))
        named_moved = _backward_with_kernel(handle, moved, q, k, v, out, dout, lse)
        assert (fa3.backward_workspace_size(q, k, deterministic=True, handle=handle)
                == fa3.backward_workspace_size(q, k, deterministic=True))
    assert moved in ran_mine and short not in ran_mine, sorted(ran_mine)
    assert short in ran_built_in and moved not in ran_built_in, sorted(ran_built_in)
    mine = grads["mine"]
    assert not any(torch.isnan(g).any() for g in mine)
    assert _same(mine, named_moved), f"handle=: not the bits of {moved}"


def test_attention_uses_the_handle_in_both_passes(device: torch.device,
                                                  moved_table: Any) -> None:
    path, picks = moved_table
    q, k, v = (x.requires_grad_() for x in _inputs(device))
    handle = fa3.Handle(device.index, tuning_table=path)
    out = fa3.attention(q, k, v, deterministic=True, handle=handle)
    dout = torch.randn_like(out)
    result: dict[str, Any] = {}
    ran = _launched(lambda: result.update(grads=torch.autograd.grad(out, (q, k, v), dout)))
    assert picks["bwd"][1] in ran and picks["bwd"][0] not in ran, sorted(ran)
    grads = result["grads"]
    detached = [x.detach() for x in (q, k, v)]
    named_out, lse = fa3.forward(*detached, return_lse=True, kernel=picks["fwd"][1])
    assert torch.equal(out.detach(), named_out)
    named = _backward_with_kernel(handle, picks["bwd"][1], *detached, named_out, dout, lse)
    assert _same(grads, named)
    # (The forward with an LSE runs the twin without _ls under either table; the backward's
    # picks differ.) A handle closed before the backward runs: a sentence, not a use of a
    # destroyed handle.
    out = fa3.attention(q, k, v, handle=handle)
    torch.cuda.synchronize()
    handle.close()
    with pytest.raises(ValueError, match="closed"):
        out.backward(dout)


def test_bad_handles_are_refused_before_anything_runs(device: torch.device,
                                                      tmp_path: Path) -> None:
    q, k, v = _inputs(device)
    out = torch.full_like(q, float("nan"))
    with pytest.raises(TypeError, match="handle must be an fa3.Handle"):
        fa3.forward(q, k, v, out=out, handle=object())
    with pytest.raises(TypeError, match="handle must be an fa3.Handle"):
        fa3.select_kernel(q, k, v, handle=ctypes.c_void_p(1))
    closed = fa3.Handle(device.index)
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        fa3.forward(q, k, v, out=out, handle=closed)
    # A Handle of another device: made by hand (there may be one GPU), as its fields say.
    other = fa3.Handle(device.index)
    other.device = device.index + 1
    with pytest.raises(ValueError, match=f"device {device.index + 1}"):
        fa3.forward(q, k, v, out=out, handle=other)
    other.device = device.index
    other.close()
    # A handle of another libfa3 file, given to this one's functions, and the other way.
    copy = tmp_path / "second" / "libfa3.so"
    copy.parent.mkdir()
    shutil.copy2(fa3.library_path(), copy)
    second = fa3.open_library(copy)
    with fa3.Handle(device.index, library=second.library) as foreign:
        with pytest.raises(ValueError, match="belongs to the libfa3 loaded from"):
            fa3.forward(q, k, v, out=out, handle=foreign)
        lse = torch.zeros(SHAPE[0], SHAPE[2], SHAPE[1], device=device)
        with pytest.raises(ValueError, match="belongs to the libfa3 loaded from"):
            fa3.backward(q, k, v, q, q, lse, dq=out, handle=foreign)
        with pytest.raises(ValueError, match="belongs to the libfa3 loaded from"):
            fa3.attention(q, k, v, handle=foreign)
        # Its own library's functions take it.
        assert second.select_kernel(q, k, v, handle=foreign) == fa3.select_kernel(q, k, v)
    with fa3.Handle(device.index) as mine:
        with pytest.raises(ValueError, match="belongs to the libfa3 loaded from"):
            second.forward(q, k, v, out=out, handle=mine)
    torch.cuda.synchronize()
    assert torch.isnan(out).all(), "a refused call wrote its output"
