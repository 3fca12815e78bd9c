"""Python-level argument checks of fa3.forward, fa3.backward and fa3.attention that need
PyTorch but no GPU and no library: they must fire before the library is loaded or called."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import fa3  # noqa: E402


def cpu_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(torch.zeros(1, 8, 2, 64, dtype=torch.float16) for _ in range(3))


def test_a_non_tensor_is_a_type_error() -> None:
    _, k, v = cpu_inputs()
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got list"):
        fa3.forward([1.0], k, v)  # type: ignore[arg-type]


def test_cpu_tensors_are_a_value_error() -> None:
    q, k, v = cpu_inputs()
    with pytest.raises(ValueError, match="q must be on a CUDA device"):
        fa3.forward(q, k, v)


def test_select_kernel_checks_the_same_way() -> None:
    q, k, _ = cpu_inputs()
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got str"):
        fa3.select_kernel("q", k, q)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="q must be on a CUDA device"):
        fa3.select_kernel(q, k, q)


def test_backward_checks_the_same_way() -> None:
    q, k, v = cpu_inputs()
    lse = torch.zeros(1, 2, 8, dtype=torch.float32)
    with pytest.raises(ValueError, match="q must be on a CUDA device"):
        fa3.backward(q, k, v, q, q, lse)
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got list"):
        fa3.backward([1.0], k, v, q, q, lse)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="q must be on a CUDA device"):
        fa3.backward_workspace_size(q, k)


def test_attention_checks_the_same_way() -> None:
    q, k, v = cpu_inputs()
    with pytest.raises(ValueError, match="q must be on a CUDA device"):
        fa3.attention(q, k, v)
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got str"):
        fa3.attention("q", k, v)  # type: ignore[arg-type]
