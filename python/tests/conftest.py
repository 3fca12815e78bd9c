"""Shared test setup: makes ``import fa3`` work from the source tree, decides what can run
here (library, PyTorch, CUDA, Hopper) with a reason when something cannot, gives each test
its own seed, and prints the numerical-error report at the end of the run.

libfa3.so comes from $FA3_LIBRARY (tools/run_python_tests.sh sets it to build/libfa3.so) or
from the package's own search (which also finds the source tree's build/libfa3.so).
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
PYTHON_DIR = TESTS_DIR.parent
REPO_DIR = PYTHON_DIR.parent
# python/ for the fa3 package, python/tests for attention_reference (also under
# --import-mode=importlib, which does not put test directories on sys.path).
for directory in (PYTHON_DIR, TESTS_DIR):
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))

import fa3  # noqa: E402  (needs the path above)

HOPPER_CAPABILITY = (9, 0)

# One row per numerical comparison, printed by pytest_terminal_summary: the forward's
# (test_forward.py) and the backward's, a row per gradient (test_backward.py).
ERROR_REPORT: list[dict[str, Any]] = []
GRADIENT_REPORT: list[dict[str, Any]] = []


def gpu_run_refusal() -> str | None:
    """Why this machine cannot run the GPU tests (the reason their fixtures would skip with),
    or None when it can."""
    try:
        fa3.library_path()
    except fa3.LibraryNotFoundError as error:
        return f"libfa3.so not found: {error}"
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device (no GPU or no driver)"
    capability = torch.cuda.get_device_capability(torch.cuda.current_device())
    if capability != HOPPER_CAPABILITY:
        return f"needs a Hopper GPU (compute capability 9.0), not {capability[0]}.{capability[1]}"
    if not fa3.kernels():
        return "libfa3.so has no compiled kernels (built with FWD_KERNELS=)"
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """With FA3_REQUIRE_GPU=1 (tools/gpu-check.sh's python step sets it) a machine that cannot
    run the GPU tests fails the run, instead of every GPU test skipping and the run passing."""
    if os.environ.get("FA3_REQUIRE_GPU") == "1":
        reason = gpu_run_refusal()
        if reason is not None:
            pytest.exit(f"FA3_REQUIRE_GPU=1, but the GPU tests cannot run here: {reason}",
                        returncode=1)


@pytest.fixture(scope="session")
def library() -> str:
    """The path of the loaded libfa3; skips the test when there is none, fails it when
    FA3_LIBRARY names a file that exists but does not load (a broken build must not pass
    as a missing one: tools/run_python_tests.sh always sets FA3_LIBRARY)."""
    try:
        return fa3.library_path()
    except fa3.LibraryNotFoundError as error:
        named = os.environ.get("FA3_LIBRARY")
        if named and os.path.isfile(named):
            pytest.fail(f"FA3_LIBRARY={named} exists but does not load: {error}")
        pytest.skip(f"libfa3.so not found: {error}")


@pytest.fixture(scope="session")
def torch_module() -> Any:
    """PyTorch, or a skip saying it is not installed."""
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture(scope="session")
def hopper(library: str, torch_module: Any) -> Any:
    """The CUDA device the GPU tests run on: a Hopper GPU with libfa3 kernels, else skip."""
    torch = torch_module
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device (no GPU or no driver)")
    device = torch.device("cuda", torch.cuda.current_device())
    capability = torch.cuda.get_device_capability(device)
    if capability != HOPPER_CAPABILITY:
        pytest.skip(f"needs a Hopper GPU (compute capability 9.0); "
                    f"{torch.cuda.get_device_name(device)} is {capability[0]}.{capability[1]}")
    if not fa3.kernels():
        pytest.skip(f"{library} has no compiled kernels (built with FWD_KERNELS=)")
    return device


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A seed of its own for every test (stable across runs: the test id's CRC32)."""
    return zlib.crc32(request.node.nodeid.encode("utf-8"))


@pytest.fixture
def seeded(hopper: Any, torch_module: Any, seed: int) -> Any:
    """The Hopper device, with PyTorch's generators seeded for this test."""
    torch_module.manual_seed(seed)
    return hopper


@pytest.fixture
def error_report(request: pytest.FixtureRequest) -> Any:
    """record(**columns) adds a row for this test to the end-of-run error report."""

    def record(**columns: Any) -> None:
        ERROR_REPORT.append({"test": request.node.name, **columns})

    return record


@pytest.fixture
def gradient_report(request: pytest.FixtureRequest) -> Any:
    """record(gradient=..., err=..., plain_err=..., bound=...) adds a row for this test to
    the end-of-run table of the backward's errors."""

    def record(**columns: Any) -> None:
        GRADIENT_REPORT.append({"test": request.node.name, **columns})

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if GRADIENT_REPORT:
        terminalreporter.section("fa3 backward numerical error (max |difference|)")
        terminalreporter.write_line(
            f"{'test':<58} {'grad':>4} {'fa3-ref64':>10} {'plain_dt-ref64':>14} "
            f"{'bound':>10} {'fa3/bound':>9}")
        for row in GRADIENT_REPORT:
            share = row["err"] / row["bound"] if row["bound"] > 0 else float("inf")
            terminalreporter.write_line(
                f"{row['test'][:58]:<58} {row['gradient']:>4} {row['err']:>10.3e} "
                f"{row['plain_err']:>14.3e} {row['bound']:>10.3e} {share:>9.2f}")
    if not ERROR_REPORT:
        return
    terminalreporter.section("fa3 numerical error (max |difference|)")
    terminalreporter.write_line(
        f"{'test':<58} {'fa3-ref64':>10} {'sdpa_dt-ref64':>13} {'bound':>10} "
        f"{'fa3-sdpa32':>10} {'lse-ref64':>10}")
    for row in ERROR_REPORT:
        terminalreporter.write_line(
            f"{row['test'][:58]:<58} {row['err']:>10.3e} {row['sdpa_err']:>13.3e} "
            f"{row['bound']:>10.3e} {row['err_vs_sdpa_fp32']:>10.3e} {row['lse_err']:>10.3e}")
