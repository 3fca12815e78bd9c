"""bench/compare.py imported as a module, for the tests of its logic (test_compare.py, no
torch) and of its check on the GPU (test_compare_gpu.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

COMPARE = Path(__file__).resolve().parents[2] / "bench" / "compare.py"


def load_compare(name: str) -> ModuleType:
    """compare.py under the module name `name` (it imports torch only when asked:
    import_torch())."""
    spec = importlib.util.spec_from_file_location(name, COMPARE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
