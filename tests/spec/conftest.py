"""Fixtures for the catalogue, loader, CLI and marker tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .specfiles import family_yaml


@pytest.fixture
def make_catalogue(tmp_path: Path) -> Callable[..., Path]:
    """Write ``{file name: YAML text}`` into a fresh catalogue directory and return it."""

    def make(files: dict[str, str] | None = None) -> Path:
        root = tmp_path / "catalogue"
        root.mkdir(exist_ok=True)
        for name, text in (files or {"stomp-test.yaml": family_yaml("stomp-test", "STOMP-TEST-ONE")}).items():
            (root / name).write_text(text, encoding="utf-8")
        return root

    return make
