"""Small set-up facts of issue 16 (point 11): tox envs can be rerun, build outputs are git-ignored,
and the pytest settings' plugin options come with the package's own dependencies."""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tox_conformance_envs_write_a_new_run_directory_each_time() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    runs = {name: tox[name]["commands"] for name in tox.sections() if "ackspec run" in tox[name].get("commands", "")}
    assert "testenv:reference" in runs
    for name, command in runs.items():
        assert "--out" not in command, f"{name}: a fixed --out already holds a run the second time"


def test_reports_and_virtual_environments_are_ignored() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert "/report/" in ignored and ".venv/" in ignored and "/ackspec-out/" in ignored


def test_pytest_settings_need_only_the_packages_the_install_brings() -> None:
    """``pytest`` from the checkout reads pyproject's settings with --strict-config: an option of a
    plugin that only a dev extra installs made it exit 4 ("Unknown config option: timeout")."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = project["tool"]["pytest"]["ini_options"]
    needs = {"timeout": "pytest-timeout", "timeout_method": "pytest-timeout"}
    installed = {re.split(r"[<>=;\[ ]", dep, maxsplit=1)[0].lower() for dep in project["project"]["dependencies"]}
    for option, package in needs.items():
        if option in options:
            assert package in installed, f"pytest option {option!r} needs {package} in [project] dependencies"
