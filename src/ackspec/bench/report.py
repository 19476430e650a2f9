"""Benchmark results: medians, the reference-vs-fastest-real-broker ratio, table, JSON and plot."""

from __future__ import annotations

import json
import platform
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

RATIO_BASELINES = ("rabbitmq", "activemq")
"""The reference broker is compared with the faster of these two (issue 3)."""


@dataclass
class Cell:
    """One scenario against one target: msg/s of each repetition, or the error that stopped it."""

    scenario: str
    target: str
    messages: int
    runs: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs else None


@dataclass
class BenchResult:
    scenarios: list[tuple[str, str]]
    """(name, title) in table order."""
    targets: list[str]
    repetitions: int
    body_bytes: int
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def cell(self, scenario: str, target: str) -> Cell | None:
        return self.cells.get((scenario, target))

    def ratio(self, scenario: str) -> float | None:
        """reference msg/s divided by the faster of RabbitMQ/ActiveMQ, when all are measured."""
        ref = self.cell(scenario, "reference")
        baselines = [c.median for t in RATIO_BASELINES if (c := self.cell(scenario, t)) and c.median]
        if not ref or not ref.median or not baselines:
            return None
        return ref.median / max(baselines)

    def to_json(self) -> dict[str, object]:
        return {
            "format": "ackspec-bench/1",
            "repetitions": self.repetitions,
            "body_bytes": self.body_bytes,
            "ratio_definition": "reference / max(" + ", ".join(RATIO_BASELINES) + ")",
            "machine": {"python": platform.python_version(), "platform": platform.platform()},
            "scenarios": [{"name": n, "title": t} for n, t in self.scenarios],
            "targets": self.targets,
            "results": [
                {**asdict(c), "median": c.median} for c in self.cells.values()
            ],
            "ratios": {name: self.ratio(name) for name, _ in self.scenarios},
        }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_table(result: BenchResult) -> str:
    """Plain-text table: one row per scenario, msg/s (median) per target, then the ratio."""
    show_ratio = "reference" in result.targets and any(t in result.targets for t in RATIO_BASELINES)
    headers = ["scenario", *result.targets] + (["ref/best(rmq,amq)"] if show_ratio else [])
    rows: list[list[str]] = []
    for name, _ in result.scenarios:
        row = [name]
        for target in result.targets:
            cell = result.cell(name, target)
            row.append("error" if cell and cell.error else _fmt(cell.median if cell else None))
        if show_ratio:
            ratio = result.ratio(name)
            row.append("-" if ratio is None else f"{ratio:.2f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)

    lines = [line(headers), "  ".join("-" * w for w in widths)]
    lines.extend(line(row) for row in rows)
    errors = [c for c in result.cells.values() if c.error]
    lines.append(f"msg/s, median of {result.repetitions} runs, {result.body_bytes}-byte bodies, loopback")
    lines.extend(f"error: {c.target} / {c.scenario}: {c.error}" for c in errors)
    return "\n".join(lines)


def write_outputs(result: BenchResult, out: Path) -> list[Path]:
    """bench.json, bench.txt and bench.png in ``out``; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "bench.json", out / "bench.txt", out / "bench.png"]
    written[0].write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    written[1].write_text(format_table(result) + "\n", encoding="utf-8")
    plot(result, written[2])
    return written


def plot(result: BenchResult, path: Path) -> None:
    import matplotlib  # noqa: PLC0415  (imported late: slow, and only needed for the plot)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    names = [name for name, _ in result.scenarios]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.6 * len(names)), 4.8))
    width = 0.8 / max(1, len(result.targets))
    for k, target in enumerate(result.targets):
        values = []
        for name in names:
            cell = result.cell(name, target)
            values.append(cell.median if cell and cell.median else 0.0)
        ax.bar([i + k * width for i in range(len(names))], values, width, label=target)
    centres = [i + width * (len(result.targets) - 1) / 2 for i in range(len(names))]
    ax.set_xticks(centres, names, rotation=20, ha="right")
    ax.set_ylabel("messages / s (median)")
    if any(c.median for c in result.cells.values()):
        ax.set_yscale("log")
    ax.set_title(f"ackspec bench: STOMP on loopback, {result.body_bytes}-byte messages")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
