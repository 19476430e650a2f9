"""Packs the repository's ``spec/`` (the catalogue as language-neutral data) into the wheel.

The requirement YAML, its JSON Schemas and the broker and client profiles live at the top of the
repository, where readers other than Python find them; an installed package has no checkout around
it, so the wheel carries a copy as ``ackspec/spec/data/`` (read by :mod:`ackspec.spec.data`).
Everything else is configured in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SPEC = Path(__file__).resolve().parent / "spec"


class BuildPyWithSpec(build_py):
    """``build_py`` that also copies ``spec/`` into the built package (not in an editable install,
    which reads the checkout's ``spec/`` itself)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            self.copy_tree(str(SPEC), str(Path(self.build_lib) / "ackspec" / "spec" / "data"))


setup(cmdclass={"build_py": BuildPyWithSpec})
