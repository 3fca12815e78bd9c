"""bench/compare.py without PyTorch and without a GPU: --help and argument errors (which must
not need torch), and the pure logic of its side-by-side mode (the systems' order over rounds,
the tables, the time estimate).
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from compare_script import COMPARE, load_compare

REPO_DIR = Path(__file__).resolve().parents[2]


def hidden_torch_env(directory: Path) -> dict[str, str]:
    """An environment in which `import torch` fails for sure, installed or not: a torch.py
    that raises ImportError comes first on the path."""
    (directory / "torch.py").write_text(
        'raise ImportError("torch is hidden by python/tests/test_compare.py")\n')
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(directory)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_compare(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(COMPARE), *arguments], capture_output=True,
                          text=True, timeout=60, env=hidden_torch_env(tmp_path),
                          cwd=REPO_DIR, check=False)


def test_help_works_without_torch(tmp_path: Path) -> None:
    result = run_compare(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: compare.py"), result.stdout
    assert "--systems" in result.stdout
    assert "torch is hidden" not in result.stderr


def test_an_argument_error_needs_no_torch_either(tmp_path: Path) -> None:
    result = run_compare(tmp_path, "--systems", "fa3,fa3-prev")
    assert result.returncode == 2, result.stderr
    assert "fa3-prev needs --prev-lib" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_run_without_torch_says_so(tmp_path: Path) -> None:
    result = run_compare(tmp_path, "--seqlens", "512")
    assert result.returncode == 2, result.stderr
    assert "compare.py needs PyTorch" in result.stderr
    assert "Traceback" not in result.stderr


# ---- the module's pure logic (imported as a module; torch is not imported by it) ---------


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    return load_compare("fa3_bench_compare")


def test_parsing_the_arguments_does_not_import_torch(compare: ModuleType) -> None:
    compare.parse_args(["--side-by-side", "--dtype", "fp16"])
    assert "bf16" in compare.DTYPES and "fp32" not in compare.DTYPES
    assert sorted(compare.DTYPES) == ["bf16", "fp16"]
    assert compare.torch is None


def test_the_default_mode_is_unchanged(compare: ModuleType) -> None:
    args = compare.parse_args([])
    assert args.systems == ["fa3", "cudnn", "flash"]
    assert (args.dtype, args.rounds, args.iters, args.warmup) == (["bf16"], 3, 30, 5)
    assert args.seqlens == [512, 1024, 2048, 4096, 8192, 16384]
    quick = compare.parse_args(["--quick"])
    assert (quick.iters, quick.warmup, quick.seqlens) == (10, 3, [1024, 4096, 16384])


def test_side_by_side_defaults(compare: ModuleType, tmp_path: Path) -> None:
    prev = tmp_path / "libfa3.so"
    prev.write_bytes(b"")
    args = compare.parse_args(["--side-by-side", "--prev-lib", str(prev)])
    # fa3 as inference calls it (no LSE) and as training does (with the LSE).
    assert args.systems == ["fa3", "fa3-lse", "fa3-prev", "fa3-public"]
    assert args.dtype == ["bf16", "fp16"]
    # Each system first in two rounds, 10 calls a round.
    assert (args.rounds, args.iters, args.warmup) == (8, 80, 5)
    # Without --prev-lib the previous build is left out, not an error.
    alone = compare.parse_args(["--side-by-side", "--dtype", "bf16"])
    assert alone.systems == ["fa3", "fa3-lse", "fa3-public"]
    assert (alone.dtype, alone.rounds, alone.iters) == (["bf16"], 6, 60)
    # FA2 and cuDNN on request; the rounds follow the number of systems.
    more = compare.parse_args(["--side-by-side", "--prev-lib", str(prev),
                               "--systems", "fa3,fa3-prev,fa3-public,cudnn,flash"])
    assert (more.rounds, more.iters) == (10, 100)
    given = compare.parse_args(["--side-by-side", "--rounds", "3", "--iters", "30"])
    assert (given.rounds, given.iters) == (3, 30)


@pytest.mark.parametrize("arguments, message", [
    (["--systems", "fa3,nope"], "unknown systems"),
    (["--systems", "fa3,fa3"], "each once"),
    (["--systems", "fa3-prev"], "needs --prev-lib"),
    (["--prev-lib", "/nonexistent/libfa3.so"], "no such file"),
    (["--public-fa3", "/nonexistent/fa3"], "no such directory"),
    (["--dtype", "fp32"], "--dtype"),
    (["--dtype", "bf16,bf16"], "--dtype"),
    (["--rounds", "0"], "--rounds"),
    (["--seqlens", "0"], "--seqlens"),
    (["--hdims", "0", "--estimate-only"], "--hdims"),
    (["--seqlens", "1024,1024"], "--seqlens"),
    (["--causal", "2"], "--causal"),
    (["--hdims", "-64"], "--hdims"),
])
def test_argument_errors(compare: ModuleType, capsys: pytest.CaptureFixture[str],
                         arguments: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as raised:
        compare.parse_args(arguments)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


def test_png_needs_matplotlib_before_anything_runs(compare: ModuleType,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without matplotlib --png is refused when the arguments are read, not after the run."""
    find_spec = compare.importlib.util.find_spec
    monkeypatch.setattr(compare.importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else find_spec(name, *a))
    with pytest.raises(SystemExit) as raised:
        compare.parse_args(["--png", "out.png"])
    assert raised.value.code == 2
    assert "--png out.png needs matplotlib" in capsys.readouterr().err
    # The estimate alone draws nothing.
    assert compare.parse_args(["--png", "out.png", "--estimate-only"]).png == "out.png"


@pytest.mark.parametrize("count, rounds", [(3, 6), (3, 3), (2, 4), (5, 10), (4, 4)])
def test_every_system_takes_every_place_equally_often(compare: ModuleType, count: int,
                                                      rounds: int) -> None:
    for start in range(count):
        orders = compare.round_orders(count, rounds, start)
        assert len(orders) == rounds
        for order in orders:
            assert sorted(order) == list(range(count))
        for place in range(count):
            firsts = [order[place] for order in orders]
            assert all(firsts.count(s) == rounds // count for s in range(count)), orders


def test_the_first_place_goes_round_over_the_shapes(compare: ModuleType) -> None:
    # One round, three systems: over three shapes each system is timed first once.
    firsts = [compare.round_orders(3, 1, start)[0][0] for start in range(3)]
    assert sorted(firsts) == [0, 1, 2]
    assert compare.round_orders(3, 2, 0) == [[0, 1, 2], [1, 2, 0]]


def test_round_shares_split_the_calls(compare: ModuleType) -> None:
    assert compare.round_shares(60, 6) == [10] * 6
    # Every round the same calls: a longer first round would favour the system opening it.
    assert compare.round_shares(10, 3) == [4, 4, 4]
    assert compare.round_shares(2, 5) == [1, 1]
    # A shape that times fewer systems than asked for (a WRONG cell, no public FA3): its
    # rounds go up to a multiple of them, so each takes each place equally often.
    assert compare.round_shares(80, 8, 3) == [10] * 9
    assert compare.round_shares(60, 6, 4) == [10] * 8
    assert compare.round_shares(60, 6, 3) == [10] * 6
    for systems in range(1, 5):
        rounds = len(compare.round_shares(80, 8, systems))
        counts = [0] * systems
        for order in compare.round_orders(systems, rounds, 5):
            counts[order[0]] += 1
        assert len(set(counts)) == 1, (systems, counts)
    # Fewer rounds than systems: the first place goes round over the grid instead.
    assert compare.round_shares(30, 1, 3) == [30]


def test_the_side_by_side_grid_fits_the_gpu_budget(compare: ModuleType, tmp_path: Path) -> None:
    """The whole grid, bf16 and fp16, three systems: under 8 minutes by the estimate's
    deliberately slow model (docs/bench.md), one process per dtype as gpu-check.sh runs it."""
    prev = tmp_path / "libfa3.so"
    prev.write_bytes(b"")
    total = 0.0
    for dtype in ("bf16", "fp16"):
        args = compare.parse_args(["--side-by-side", "--prev-lib", str(prev), "--dtype", dtype])
        shapes = compare.shapes_of(args)
        assert len(shapes) == 36
        total += compare.estimate_seconds(shapes, len(args.dtype), len(args.systems),
                                          args.iters, args.warmup, args.rounds)
    assert 60 < total < 8 * 60, total


def test_the_estimate_grows_with_the_work(compare: ModuleType) -> None:
    shapes = [compare.Shape(16384, 128, False)]
    base = compare.estimate_seconds(shapes, 1, 3, 60, 5, 6)
    assert compare.estimate_seconds(shapes, 2, 3, 60, 5, 6) > base
    assert compare.estimate_seconds(shapes, 1, 4, 60, 5, 6) > base
    assert compare.estimate_seconds(shapes, 1, 3, 120, 5, 6) > base
    # 16k d128: 2.2 TFLOP a call, 91 calls of each of 3 systems at 300 TFLOPS: ~2 s.
    assert 1.5 < base - compare.ESTIMATE_STARTUP_SECONDS < 3.5


# ---- tables ---------------------------------------------------------------------------------


def fake_cells(compare: ModuleType, seqlen: int, causal: bool,
               tflops: dict[str, Any]) -> list[Any]:
    """Cells of one shape whose median time gives the TFLOPS asked for ("wrong" and
    "unavailable" for cells that did not run)."""
    shape = compare.Shape(seqlen, 128, causal)
    cells = []
    for key, value in tflops.items():
        cell = compare.Cell(shape, compare.System(key, f"label of {key}", lambda *a: None))
        if value == "wrong":
            cell.status, cell.reason = "wrong", "max |out - fp32 ref| = 1 > tolerance 0.01"
        elif value == "unavailable":
            cell.status, cell.reason = "unavailable", "head dim 128 not supported"
        else:
            cell.times_ms = [shape.flops / (value * 1e12) * 1e3] * 3
            cell.max_diff = 1e-3
        cells.append(cell)
    return cells


@pytest.fixture
def grid(compare: ModuleType) -> list[list[Any]]:
    return [
        fake_cells(compare, 512, False, {"fa3": 400.0, "fa3-prev": 380.0, "fa3-public": 320.0}),
        fake_cells(compare, 2048, False, {"fa3": 600.0, "fa3-prev": 600.0, "fa3-public": 500.0}),
        fake_cells(compare, 4096, True, {"fa3": 550.0, "fa3-prev": "wrong",
                                         "fa3-public": "unavailable"}),
    ]


def test_the_markdown_table_has_a_row_per_shape_and_the_ratios(compare: ModuleType,
                                                               grid: list[list[Any]]) -> None:
    text = compare.markdown_table(grid, "bf16", ["GPU: NVIDIA H100"])
    lines = text.splitlines()
    assert lines[0].startswith("## Forward, bf16, median TFLOPS (fa3 = label of fa3;")
    assert "GPU: NVIDIA H100  " in lines
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == ("| config | seqlen | batch | heads | fa3 | fa3-prev | fa3-public | "
                        "this/prev | this/public | notes |")
    assert table[1].count("|") == table[0].count("|")
    assert table[2] == "| d128 | 512 | 32 | 16 | 400.0 | 380.0 | 320.0 | 1.053 | 1.250 |  |"
    assert table[3] == "| d128 | 2k | 8 | 16 | 600.0 | 600.0 | 500.0 | 1.000 | 1.200 |  |"
    assert table[4].startswith("| d128 causal | 4k | 4 | 16 | 550.0 | WRONG | n/a | - | - | "
                               "fa3-prev: max |out")
    assert "fa3-public: head dim 128 not supported" in table[4]
    summary = [line for line in lines if line.startswith("- ")]
    geomean = math.sqrt(400 / 380 * 600 / 600)
    assert summary[0] == (f"- this/prev, all shapes: geometric mean {geomean:.3f} over 2 "
                          f"shapes, min 1.000 (d128 2k), max 1.053 (d128 512); without d128 "
                          f"causal 4k (not both ran correctly)")
    assert summary[1].startswith("- this/prev, from 2k: geometric mean 1.000 over 1 shapes")
    assert summary[2].startswith("- this/public, all shapes: geometric mean")
    assert len(summary) == 4


def test_the_wide_csv_puts_the_systems_side_by_side(compare: ModuleType, grid: list[list[Any]],
                                                    tmp_path: Path) -> None:
    path = tmp_path / "side_by_side_bf16.csv"
    compare.write_wide_csv(path, grid, "NVIDIA H100", "bf16")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3
    assert list(rows[0])[:7] == ["gpu", "dtype", "head_dim", "causal", "batch", "seqlen", "heads"]
    assert list(rows[0])[-3:] == ["this_over_prev", "this_over_public", "reasons"]
    assert rows[0]["fa3_tflops"] == "400.00" and rows[0]["fa3_prev_tflops"] == "380.00"
    assert float(rows[0]["this_over_prev"]) == pytest.approx(400 / 380, abs=1e-4)
    assert float(rows[1]["this_over_public"]) == pytest.approx(1.2, abs=1e-4)
    assert rows[2]["fa3_prev_status"] == "wrong" and rows[2]["fa3_prev_tflops"] == ""
    assert rows[2]["this_over_prev"] == "" and rows[2]["this_over_public"] == ""
    assert "fa3-public: head dim 128 not supported" in rows[2]["reasons"]


def test_the_long_csv_keeps_each_shapes_dtype(compare: ModuleType, grid: list[list[Any]],
                                              tmp_path: Path) -> None:
    path = tmp_path / "all.csv"
    compare.write_csv(str(path), grid, "NVIDIA H100", ["bf16", "bf16", "fp16"])
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == compare.CSV_COLUMNS
    assert [row["dtype"] for row in rows] == ["bf16"] * 6 + ["fp16"] * 3
    assert rows[1]["system"] == "fa3-prev" and rows[1]["tflops"] == "380.00"


def test_ratios_appear_only_for_systems_that_run(compare: ModuleType) -> None:
    assert [h for _, _, h in compare.active_ratios(["fa3", "cudnn", "flash"])] == ["fa3/cuDNN"]
    assert [h for _, _, h in compare.active_ratios(["fa3", "fa3-prev", "fa3-public"])] == [
        "this/prev", "this/public"]
    assert compare.active_ratios(["fa3-prev", "fa3-public"]) == []
    assert compare.ratio_column("fa3", "cudnn") == "fa3_over_cudnn"


def test_per_dtype_paths(compare: ModuleType) -> None:
    assert compare.per_dtype_path("out/fwd.png", "fp16", True) == "out/fwd_fp16.png"
    assert compare.per_dtype_path("out/fwd.png", "fp16", False) == "out/fwd.png"


# ---- the backward (--direction) ---------------------------------------------------------------


def test_help_names_the_directions(tmp_path: Path) -> None:
    result = run_compare(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert "--direction {fwd,bwd,fwdbwd}" in result.stdout
    assert "fa3-det" in result.stdout


def test_the_flop_count_of_each_direction(compare: ModuleType) -> None:
    # The paper grid at 4k, d128: batch 4, 16 heads; forward 4 * B * H * S^2 * D.
    forward = 4.0 * 4 * 16 * 4096 ** 2 * 128
    shape = compare.Shape(4096, 128, False)
    assert (shape.batch, shape.heads, shape.direction) == (4, 16, "fwd")
    assert shape.flops == shape.forward_flops == forward
    backward = compare.Shape(4096, 128, False, direction="bwd")
    assert backward.forward_flops == forward and backward.flops == 2.5 * forward
    assert compare.Shape(4096, 128, False, direction="fwdbwd").flops == 3.5 * forward
    # causal halves every direction's count
    assert compare.Shape(4096, 128, True, direction="bwd").flops == 2.5 * forward / 2
    # Shape's positional fields are unchanged (bench/clock_trace.py builds them so)
    assert compare.Shape(1024, 64, True, 2, 8).flops == 4.0 * 2 * 8 * 1024 ** 2 * 64 / 2


def test_tflops_of_a_backward_cell_use_its_count(compare: ModuleType) -> None:
    shape = compare.Shape(8192, 128, True, direction="bwd")
    cell = compare.Cell(shape, compare.System("fa3", "fa3", lambda *a: None))
    cell.times_ms = [shape.forward_flops * 2.5 / 500e12 * 1e3] * 3  # 500 TFLOPS by 2.5x
    assert cell.tflops() == pytest.approx(500.0)


def test_direction_defaults(compare: ModuleType) -> None:
    assert compare.parse_args([]).direction == "fwd"
    args = compare.parse_args(["--direction", "bwd"])
    assert args.systems == ["fa3", "fa3-public", "cudnn", "flash"]
    assert not args.systems_given  # so an fa3-public that cannot be imported is left out
    assert compare.parse_args(["--direction", "fwdbwd"]).systems == args.systems
    assert compare.parse_args([]).systems == ["fa3", "cudnn", "flash"]
    assert all(shape.direction == "bwd" for shape in compare.shapes_of(args))
    assert len(compare.shapes_of(args)) == 36


def test_side_by_side_backward_defaults(compare: ModuleType, tmp_path: Path) -> None:
    args = compare.parse_args(["--side-by-side", "--direction", "bwd"])
    assert args.systems == ["fa3", "fa3-public", "cudnn"]
    assert args.dtype == ["bf16", "fp16"]
    assert (args.rounds, args.iters, args.warmup) == (6, 60, 5)
    # --prev-lib does not bring the forward's systems in; fa3-prev and fa3-det on request.
    prev = tmp_path / "libfa3.so"
    prev.write_bytes(b"")
    with_prev = compare.parse_args(["--side-by-side", "--direction", "bwd", "--prev-lib",
                                    str(prev)])
    assert with_prev.systems == ["fa3", "fa3-public", "cudnn"]
    more = compare.parse_args(["--side-by-side", "--direction", "bwd", "--systems",
                               "fa3,fa3-det,fa3-public,cudnn"])
    assert (more.rounds, more.iters) == (8, 80)


@pytest.mark.parametrize("arguments, message", [
    (["--direction", "bwd", "--systems", "fa3,fa3-lse"], "fa3-lse is forward-only"),
    (["--direction", "fwdbwd", "--side-by-side", "--systems", "fa3-lse"], "forward-only"),
    (["--systems", "fa3,fa3-det"], "needs --direction bwd or fwdbwd"),
    (["--systems", "fa3,fa3-prev-det"], "needs --direction bwd or fwdbwd"),
    (["--direction", "bwd", "--systems", "fa3-det,fa3-prev-det"],
     "fa3-prev-det needs --prev-lib"),
    (["--direction", "sideways"], "--direction"),
])
def test_direction_argument_errors(compare: ModuleType, capsys: pytest.CaptureFixture[str],
                                   arguments: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as raised:
        compare.parse_args(arguments)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


def test_the_backward_side_by_side_fits_the_gpu_budget(compare: ModuleType) -> None:
    """gpu-check.sh side-by-side-bwd: bf16 and fp16, a process each, each under a 240 s
    timeout; the estimate (deliberately slow) must leave room under it."""
    total = 0.0
    for dtype in ("bf16", "fp16"):
        args = compare.parse_args(["--side-by-side", "--direction", "bwd", "--dtype", dtype])
        estimate = compare.estimate_seconds(compare.shapes_of(args), len(args.dtype),
                                            len(args.systems), args.iters, args.warmup,
                                            args.rounds)
        assert estimate < 200, (dtype, estimate)
        total += estimate
    assert 60 < total < 8 * 60, total


def test_the_backward_estimate_counts_more_than_the_forward(compare: ModuleType) -> None:
    forward = [compare.Shape(16384, 128, False)]
    backward = [compare.Shape(16384, 128, False, direction="bwd")]
    base = compare.estimate_seconds(forward, 1, 3, 60, 5, 6)
    slower = compare.estimate_seconds(backward, 1, 3, 60, 5, 6)
    # 2.5x the FLOPs at 2/3 of the rate (3.75x the GPU time), plus the untimed forwards and
    # a dearer reference; the holds and the rounds' overhead stay the same
    startup = compare.ESTIMATE_STARTUP_SECONDS
    assert slower - startup > 2.5 * (base - startup)


def test_judging_a_backward_cell_holds_each_gradient_to_its_tolerance(
        compare: ModuleType) -> None:
    shape = compare.Shape(1024, 64, False, direction="bwd")
    cell = compare.Cell(shape, compare.System("fa3", "fa3", lambda *a: None))
    cell.diffs = {"dq": 1e-3, "dk": 4e-3, "dv": 1e-3}
    cell.tolerances = {"dq": 2e-3, "dk": 5e-3, "dv": 8e-3}
    cell.plain = {"dq": 1e-3, "dk": 2.5e-3, "dv": 4e-3}
    compare.judge_cell(cell)
    assert cell.status == "ok"
    assert (cell.max_diff, cell.tolerance) == (4e-3, 5e-3)  # nearest its tolerance: dk
    assert "dq 1.0e-03 dk 4.0e-03 dv 1.0e-03" in compare.describe_cell(cell)
    wrong = compare.Cell(shape, compare.System("cudnn", "cuDNN", lambda *a: None))
    wrong.diffs = {"dq": 3e-3, "dk": 1e-3, "dv": math.inf}
    wrong.tolerances = {"dq": 2e-3, "dk": 5e-3, "dv": 8e-3}
    wrong.plain = {"dq": 1e-3, "dk": 2.5e-3, "dv": 4e-3}
    compare.judge_cell(wrong)
    assert wrong.status == "wrong"
    assert wrong.reason.startswith("max |dq - fp32 ref| = 0.003 > tolerance 0.002 (2 x plain "
                                   "0.001 + 1e-05); max |dv")
    assert "dk" not in wrong.reason
    # A deterministic system whose two runs differ is wrong though within its tolerances.
    unrepeated = compare.Cell(shape, compare.System("fa3-det", "fa3 det", lambda *a: None,
                                                    deterministic=True))
    unrepeated.diffs, unrepeated.tolerances = dict(cell.diffs), dict(cell.tolerances)
    unrepeated.unrepeated = ["dq"]
    compare.judge_cell(unrepeated)
    assert unrepeated.status == "wrong"
    assert unrepeated.reason == "dq differ between two deterministic runs"


def test_the_tolerance_is_flashattentions_rule(compare: ModuleType) -> None:
    assert compare.rule_tolerance(1e-3) == pytest.approx(2e-3 + 1e-5)
    assert compare.rule_tolerance(0.0) == pytest.approx(1e-5)
    # A plain error that is not finite bounds nothing: every system over it.
    assert compare.rule_tolerance(math.inf) == 0.0
    assert compare.rule_tolerance(math.nan) == 0.0


def test_the_default_rounds_give_each_system_the_first_place_equally_often(
        compare: ModuleType) -> None:
    for systems, rounds in (("fa3", 3), ("fa3,cudnn", 4), ("fa3,cudnn,flash", 3),
                            ("fa3,fa3-det,cudnn,flash", 4)):
        args = compare.parse_args(["--systems", systems, "--direction", "bwd"]
                                  if "det" in systems else ["--systems", systems])
        assert args.rounds == rounds
        assert args.rounds % len(args.systems) == 0 or len(args.systems) == 1


def test_the_forward_check_keeps_its_reason(compare: ModuleType) -> None:
    cell = compare.Cell(compare.Shape(512, 64, False),
                        compare.System("fa3", "fa3", lambda *a: None))
    cell.diffs, cell.tolerances, cell.plain = {"out": 0.5}, {"out": 0.01}, {"out": 0.005}
    compare.judge_cell(cell)
    assert cell.reason == "max |out - fp32 ref| = 0.5 > tolerance 0.01 (2 x plain 0.005 + 1e-05)"
    assert compare.describe_cell(cell).startswith("WRONG (max |out")


def test_backward_tables(compare: ModuleType, tmp_path: Path) -> None:
    def cells(seqlen: int, values: dict[str, float]) -> list[Any]:
        shape = compare.Shape(seqlen, 128, False, direction="bwd")
        row = []
        for key, value in values.items():
            cell = compare.Cell(shape, compare.System(key, f"label of {key}", lambda *a: None))
            cell.times_ms = [shape.flops / (value * 1e12) * 1e3] * 3
            cell.diffs = {"dq": 1e-3, "dk": 2e-3, "dv": 1e-3}
            cell.max_diff = 2e-3
            row.append(cell)
        return row

    grid = [cells(1024, {"fa3": 420.0, "fa3-det": 400.0, "fa3-public": 400.0, "cudnn": 350.0}),
            cells(4096, {"fa3": 600.0, "fa3-det": 540.0, "fa3-public": 560.0, "cudnn": 500.0})]
    text = compare.markdown_table(grid, "bf16", [])
    lines = text.splitlines()
    assert lines[0].startswith("## Backward, bf16, median TFLOPS (fa3 = label of fa3;")
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == ("| config | seqlen | batch | heads | fa3 | fa3-det | fa3-public | cudnn "
                        "| fa3/cuDNN | this/public | det/default | notes |")
    assert table[3] == ("| d128 | 4k | 4 | 16 | 600.0 | 540.0 | 560.0 | 500.0 | 1.200 | 1.071 "
                        "| 0.900 |  |")
    summary = [line for line in lines if line.startswith("- ")]
    # three ratios, each over all shapes, from 1k and from 2k (the backward's targets)
    assert len(summary) == 9
    assert summary[4].startswith("- this/public, from 1k: geometric mean")
    assert summary[5].startswith("- this/public, from 2k: geometric mean 1.071 over 1 shapes")
    assert compare.table_stem("bwd", "fp16") == "side_by_side_bwd_fp16"
    assert compare.table_stem("fwd", "fp16") == "side_by_side_fp16"
    compare.write_tables(tmp_path, grid, "NVIDIA H200", "bf16", ["GPU: NVIDIA H200"])
    assert (tmp_path / "side_by_side_bwd_bf16.md").read_text().startswith("## Backward, bf16")
    with (tmp_path / "side_by_side_bwd_bf16.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert float(rows[1]["fa3_det_over_fa3"]) == pytest.approx(0.9, abs=1e-4)
    # The deterministic mode's A/B: this build's against the previous build's.
    assert compare.ratio_column("fa3-det", "fa3-prev-det") == "det_over_prev_det"
    assert float(rows[1]["fa3_over_cudnn"]) == pytest.approx(1.2, abs=1e-4)
    assert rows[1]["fa3_tflops"] == "600.00"
    long_csv = tmp_path / "all.csv"
    compare.write_csv(str(long_csv), grid, "NVIDIA H200", ["bf16", "bf16"])
    with long_csv.open() as handle:
        long_rows = list(csv.DictReader(handle))
    assert list(long_rows[0]) == compare.CSV_COLUMNS and compare.CSV_COLUMNS[-1] == "direction"
    assert {row["direction"] for row in long_rows} == {"bwd"}
    assert long_rows[0]["tflops"] == "420.00"


def test_the_estimate_alone_needs_no_torch(tmp_path: Path) -> None:
    result = run_compare(tmp_path, "--side-by-side", "--direction", "bwd", "--dtype", "bf16",
                         "--estimate-only")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("estimate: ")
    assert "36 shapes x 1 dtype(s) x 3 systems, bwd" in result.stdout


def test_the_exit_status_fails_on_fa3s_wrong_cells_only(compare: ModuleType,
                                                        capsys: Any) -> None:
    shape = compare.Shape(4096, 128, True, direction="bwd")

    def cell(key: str, status: str) -> Any:
        c = compare.Cell(shape, compare.System(key, key, lambda *a: None))
        c.status = status
        return c

    yardsticks = [cell("fa3", "ok"), cell("fa3-public", "wrong"), cell("cudnn", "wrong"),
                  cell("flash", "unavailable")]
    assert compare.exit_status([yardsticks]) == 0
    for key in ("fa3", "fa3-det", "fa3-prev", "fa3-lse"):
        assert compare.exit_status([yardsticks, [cell(key, "wrong")]]) == 1
        assert f"{key} d128 causal 4096" in capsys.readouterr().err
