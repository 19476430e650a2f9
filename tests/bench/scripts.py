"""The project's measurement scripts in ``benchmarks/`` as modules, for the tests of their parts.

They are run from a checkout (``python benchmarks/NAME.py``), not installed, so they are loaded by path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """``benchmarks/NAME.py``, imported."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
