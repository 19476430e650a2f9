"""Allure's environment and categories files, so ``allure generate`` groups failures by family.

Allure cannot group by label, only by status and regular expressions over the
failure message and trace. Each requirement family becomes one category whose
``messageRegex`` matches the IDs of its requirements; the pytest plugin puts the
IDs a test cites in its failure message (``[JMS-3.4.7-REDELIVERED-SET] ...``, see
:func:`ackspec.conformance.plugin.name_requirements`) unless the message already
names one, so a failure lands in its family. Catch-all categories follow for the rest.
"""

from __future__ import annotations

import json
import platform
import re
from typing import Any

from ackspec import __version__
from ackspec.results import RunResults
from ackspec.results.layout import RunDir


def environment_properties(results: RunResults) -> str:
    values = {
        "ackspec.version": results.ackspec_version or __version__,
        "code.version": results.code_version,
        "run.id": results.run_id,
        "run.started": results.started,
        "run.seed": "" if results.seed is None else str(results.seed),
        "run.strict": str(results.strict).lower(),
        "target.url": results.target.url,
        "target.profile": results.target.profile or "",
        "target.protocol": results.target.protocol or "",
        "target.adapter": results.target.adapter or "",
        "python": platform.python_version(),
    }
    return "".join(f"{key}={_escape(value)}\n" for key, value in values.items())


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def categories(catalogue: Any, results: RunResults | None = None) -> list[dict[str, Any]]:
    """One category per family (failed and broken tests whose message names one of its requirements)."""
    by_family: dict[str, list[str]] = {}
    if catalogue is not None:
        for requirement in catalogue:
            by_family.setdefault(requirement.family, []).append(requirement.id)
    elif results is not None:
        for test in results.tests:
            by_family.setdefault(test.requirement.split("-", 1)[0], []).append(test.requirement)
    out: list[dict[str, Any]] = []
    for family, ids in sorted(by_family.items()):
        title = family
        if catalogue is not None:
            try:
                title = f"{family}: {catalogue.family(family).title}"
            except Exception:
                title = family
        alternatives = "|".join(re.escape(i) for i in sorted(set(ids), key=len, reverse=True))
        out.append({"name": title, "matchedStatuses": ["failed", "broken"],
                    "messageRegex": f"(?s).*(?<![A-Z0-9.-])({alternatives})(?![A-Z0-9-]).*"})
    out.append({"name": "Failures citing no known requirement", "matchedStatuses": ["failed"]})
    out.append({"name": "Suite errors (broken tests)", "matchedStatuses": ["broken"]})
    return out


def write_allure_files(run_dir: RunDir, results: RunResults, catalogue: Any) -> None:
    folder = run_dir.allure_results
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "environment.properties").write_text(environment_properties(results), encoding="utf-8")
    (folder / "categories.json").write_text(json.dumps(categories(catalogue, results), indent=1), encoding="utf-8")
