"""The report as one self-contained HTML page: inline CSS, JS, data and images; no network.

The matrix (requirement x target, coloured by verdict) is rendered server-side so
the page reads without JavaScript; the script adds filtering and the drill-down
panel (rule text, source, tests, seeds, failing operations, history anomalies,
verdict timeline) from the JSON embedded in the page.

The page is a Jinja2 template (``templates/report.html``, with its ``report.css`` and
``report.js``), rendered with autoescaping on: this module only shapes the report's data into
what the template shows.
"""

from __future__ import annotations

import base64
import io
import json
from collections import Counter, defaultdict
from functools import cache
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

COLOURS = {
    "pass": "#2e7d32", "fail": "#c62828", "deviation": "#ef8f00", "stale": "#8e24aa",
    "not-applicable": "#9e9e9e", "indeterminate": "#1565c0", "error": "#4e342e",
}


def plots(figures: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(title, data URI of a PNG) per figure name; empty when matplotlib is missing."""
    if not figures:
        return []
    try:
        import matplotlib  # noqa: PLC0415 - heavy, and only needed when there are figures

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        return []
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for figure in figures:
        grouped[str(figure.get("name", "figure"))].append(figure)
    out = []
    for name, series in grouped.items():
        fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
        for s in series:
            ax.plot(s["x"], s["y"], marker="o", label=str(s.get("series") or s.get("run", "")))
        ax.set_title(name)
        ax.set_xlabel(str(series[0].get("x_label", "")))
        ax.set_ylabel(str(series[0].get("unit", "")))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        out.append((name, "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")))
    return out


INDETERMINATE_SENDS = ("sends with no confirmation either way: sent without asking for a receipt (fire-and-forget, "
                       "pre-settled) or cut off before the answer; never counted as lost or ok, not a failure")


def render_html(data: dict[str, Any]) -> str:
    """The report page for ``data`` (what :func:`ackspec.pipeline.report.build_data` returns)."""
    return _template().render(page(data))


def page(data: dict[str, Any]) -> dict[str, Any]:
    """What the template shows, from the report's data: the matrix rows, the cards and the tables."""
    targets: list[str] = data["targets"]
    cells = {(c["requirement"], c["target"]): c for c in data["cells"]}
    requirements = sorted({c["requirement"] for c in data["cells"]},
                          key=lambda r: (data["requirements"].get(r, {}).get("family", ""), r))
    coverage = data["coverage"]
    return {
        "css": _static("report.css"), "js": _static("report.js"), "payload": _payload(data),
        "targets": targets, "runs": data["runs"], "generated": data["generated"],
        "catalogue_size": coverage.get("catalogue_size", 0), "coverage": coverage,
        "titles": coverage.get("titles", {}),
        "rows": [_row(rid, data["requirements"].get(rid, {}), [cells.get((rid, t)) for t in targets])
                 for rid in requirements],
        "counts": sorted(Counter(c["verdict"] for c in data["cells"]).items()),
        "colours": list(COLOURS.items()),
        "interrupted": [f"{r['run']} ({r['target']})" for r in data["runs"] if r.get("interrupted")],
        "changes": [{"requirement": h["requirement"], "target": h["target"], **c}
                    for h in data["history"] for c in h["changes"]],
        "flaky": data["flaky"],
        "anomaly_count": len(data["anomalies"]),
        "anomaly_kinds": sorted(Counter(a["kind"] for a in data["anomalies"]).items()),
        "sends": {"confirmed": 0, "failed": 0, "indeterminate": 0, **data.get("sends", {})},
        "indeterminate_sends": INDETERMINATE_SENDS,
        "engine": data.get("engine", ""),
        "images": plots(data["figures"]),
    }


def _row(rid: str, req: dict[str, Any], cells: list[dict[str, Any] | None]) -> dict[str, Any]:
    """One matrix row: the requirement and, per target, its cell (``None``: not run there)."""
    return {"id": rid, "level": req.get("level", ""), "family": req.get("family", ""), "title": req.get("title", ""),
            "cells": [None if cell is None else {
                "verdict": cell["verdict"], "colour": COLOURS.get(cell["verdict"], "#607d8b"),
                "extra": f" +{len(cell['anomalies'])}a" if cell["anomalies"] else "", "last_run": cell["last_run"]}
                for cell in cells]}


def _payload(data: dict[str, Any]) -> Markup:
    """The data the page's script reads, as JSON that cannot close its ``<script>`` element."""
    payload = json.dumps({k: data[k] for k in ("requirements", "cells", "targets")}, default=str)
    return Markup(payload.replace("</", "<\\/").replace("<!--", "<\\!--"))  # safe: no "</" or "<!--" left


def _static(name: str) -> Markup:
    """The page's own CSS or JS, inlined as it is (the report opens with no network and no other file)."""
    return Markup(resources.files(TEMPLATES).joinpath(name).read_text(encoding="utf-8"))  # safe: our own file


TEMPLATES = "ackspec.pipeline.templates"


@cache
def _template() -> jinja2.Template:
    """The page's template, loaded once per process; ``None`` renders as nothing, as an empty cell."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("ackspec.pipeline", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             finalize=lambda value: "" if value is None else value)
    return env.get_template("report.html")
