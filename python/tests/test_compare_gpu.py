"""bench/compare.py's correctness check on the GPU: the systems of a side by side are held to
FlashAttention's rule (twice the plain same-precision attention's error, plus 1e-5) on heads
of the first and the last batch, see NaN where they leave outputs unwritten, and a
deterministic system must repeat its bits. Each defect below is planted in a system built on
fa3's own backward, and the check must call exactly that system WRONG, for that reason.
"""

from __future__ import annotations

import dataclasses
import math
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

from compare_script import load_compare  # noqa: E402


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    module = load_compare("fa3_bench_compare_gpu")
    module.import_torch()
    return module


def with_backward(compare: ModuleType, key: str, change: Any, **fields: Any) -> Any:
    """fa3's system under another key, its backward's (dq, dk, dv) passed through change."""
    fa3_system = compare.all_systems()["fa3"]

    def backward(forward: Any, dout: Any, **outputs: Any) -> tuple:
        return change(fa3_system.backward(forward, dout, **outputs), outputs)

    return dataclasses.replace(fa3_system, key=key, label=key, backward=backward, **fields)


def test_the_check_holds_each_system_to_the_rule(compare: ModuleType, seeded: Any) -> None:
    def last_head_of_last_batch_zeroed(grads: tuple, _: dict) -> tuple:
        dq, dk, dv = grads
        dk[-1, :, -1] = 0  # a tile the grid runs last, not in batch 0
        return dq, dk, dv

    def dv_left_unwritten(grads: tuple, _: dict) -> tuple:
        dq, dk, dv = grads
        # A dv the system allocated and never wrote: it must not find the previous system's
        # dv in the allocator's cache (poison_allocator filled those blocks with NaN).
        return dq, dk, torch.empty_like(dv)

    calls = {"count": 0}

    def changes_between_runs(grads: tuple, _: dict) -> tuple:
        calls["count"] += 1
        dq, dk, dv = grads
        # One element's last bits, a run's count of ulps: far within the rule, not repeated.
        dq.view(torch.int16).view(-1)[0] += calls["count"]
        return dq, dk, dv

    systems = [compare.all_systems()["fa3"], compare.fa3_det_system(),
               with_backward(compare, "last-zeroed", last_head_of_last_batch_zeroed),
               with_backward(compare, "dv-unwritten", dv_left_unwritten, takes_outputs=False),
               with_backward(compare, "det-changing", changes_between_runs, deterministic=True)]
    shape = compare.Shape(256, 64, True, batch_size=3, num_heads=6, direction="bwd")
    cells = compare.measure_shape(shape, systems, "bf16", seeded, iters=2, warmup=1, rounds=1)
    by_key = {cell.system.key: cell for cell in cells}
    for key in ("fa3", "fa3-det"):
        cell = by_key[key]
        assert cell.status == "ok", f"{key}: {cell.reason}"
        assert len(cell.times_ms) == 2
        for name in ("dq", "dk", "dv"):
            assert 0 < cell.plain[name] < 1, name  # the plain bf16 attention's error is real
            assert cell.tolerances[name] == pytest.approx(2 * cell.plain[name] + 1e-5)
            assert cell.diffs[name] <= cell.tolerances[name]
    assert by_key["fa3-det"].unrepeated == []
    assert by_key["last-zeroed"].status == "wrong"
    assert by_key["last-zeroed"].reason.startswith("max |dk - fp32 ref|")
    assert by_key["dv-unwritten"].status == "wrong"
    assert by_key["dv-unwritten"].diffs["dv"] == math.inf
    assert by_key["det-changing"].status == "wrong"
    assert by_key["det-changing"].reason == "dq differ between two deterministic runs"
    for key in ("last-zeroed", "dv-unwritten", "det-changing"):
        assert by_key[key].times_ms == [], f"{key} was timed"


def test_the_plain_attention_is_the_inputs_precision(compare: ModuleType, seeded: Any) -> None:
    shape = compare.Shape(512, 128, False, batch_size=2, num_heads=4, direction="bwd")
    sets = compare.make_input_sets(shape, torch.bfloat16, seeded)
    dout = torch.randn_like(sets[0][0])
    references = compare.references_for(shape, sets[0], dout)
    assert all(r.dtype == torch.float32 for r in references.values())
    assert {name: tuple(r.shape) for name, r in references.items()} == {
        name: (512, 2 * compare.CHECKED_HEADS, 128) for name in ("dq", "dk", "dv")}
    plain = compare.plain_errors(shape, sets[0], dout, references)
    # bf16 rounding of the outputs alone is ~2^-9 of their size: the plain errors are larger
    # than float32's and far below the outputs.
    for name, error in plain.items():
        assert 1e-5 < error < 0.1 * references[name].abs().max().item(), name
