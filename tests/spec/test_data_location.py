"""The catalogue's data lives at the repository's spec/ and travels inside the built package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ackspec.spec import data, load_catalogue

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_reads_the_top_level_spec_folder() -> None:
    assert data.SPEC_DIR == REPO / "spec"
    assert sorted(p.name for p in data.SPEC_DIR.iterdir() if p.is_dir()) == ["catalogue", "clients", "schema",
                                                                            "targets"]


def test_the_built_package_carries_the_spec_and_loads_it_without_the_checkout(tmp_path: Path) -> None:
    """What a wheel holds is what ``build_py`` writes: build it outside the checkout and load from there."""
    source, lib = tmp_path / "source", tmp_path / "lib"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(REPO / name, source / name)
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("spec", "src"):
        shutil.copytree(REPO / folder, source / folder, ignore=junk)
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)], cwd=source, check=True,
                   capture_output=True, timeout=300)
    assert (lib / "ackspec" / "spec" / "data" / "catalogue" / "stomp-ack.yaml").is_file()
    probe = ("from ackspec.spec import data, load_catalogue, load_profile\n"
             "from ackspec.spec.client_profiles import load_client_profile\n"
             "print(data.SPEC_DIR)\n"
             "print(len(load_catalogue().requirements), load_profile('reference').name,"
             " load_client_profile('stomp.py-9.0').name)\n")
    env = {**os.environ, "PYTHONPATH": str(lib)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True,
                         text=True, timeout=120).stdout.splitlines()
    assert out[0] == str(lib / "ackspec" / "spec" / "data")
    count, profile, client = out[1].split()
    assert int(count) == len(load_catalogue().requirements)
    assert (profile, client) == ("reference", "stomp.py-9.0")
