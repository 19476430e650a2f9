"""proton's private C API is reached through one module, which stops with one clear line when it is not there."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from ackspec.reference.amqp import proton_c


def test_the_installed_proton_offers_every_function_and_event_used() -> None:
    for name in (*proton_c.FUNCTIONS, *proton_c.EVENTS):
        assert hasattr(proton_c.lib, name), name


def test_a_proton_without_its_cffi_module_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cproton_ffi", None)  # what an import of a missing module meets
    with pytest.raises(proton_c.ProtonApiError, match=r"has no cffi module cproton_ffi, .*tested with 0\.39, 0\.40"):
        proton_c._load()


def test_a_proton_lacking_a_function_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = types.SimpleNamespace(**{name: object() for name in (*proton_c.FUNCTIONS, *proton_c.EVENTS)
                                   if name != "pn_link_recv"})
    monkeypatch.setitem(sys.modules, "cproton_ffi", types.SimpleNamespace(ffi=object(), lib=lib))
    with pytest.raises(proton_c.ProtonApiError, match=r"lacks pn_link_recv,? which"):
        proton_c._load()


ROOT = Path(__file__).resolve().parents[2]
CODE = [*sorted((ROOT / "src" / "ackspec").rglob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py"))]


def test_every_c_name_used_is_one_the_version_check_covers() -> None:
    listed = {*proton_c.FUNCTIONS, *proton_c.EVENTS}
    unlisted = {f"{path.relative_to(ROOT)}: {name}" for path in CODE
                for name in re.findall(r"\blib\.((?:pn|PN)_\w+)", path.read_text()) if name not in listed}
    assert not unlisted, f"proton C names used without proton_c's version check: {sorted(unlisted)}"


def test_cproton_ffi_is_imported_in_one_module_only() -> None:
    importers = {str(path.relative_to(ROOT)) for path in CODE
                 if re.search(r"^\s*(from|import) cproton_ffi\b", path.read_text(), re.MULTILINE)}
    assert importers == {"src/ackspec/reference/amqp/proton_c.py"}
