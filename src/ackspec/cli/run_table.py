"""The verdict table ``ackspec run`` prints at the end: one table per family and requirement.

On a terminal it is a rich table; anywhere else (a pipe, a CI log) plain lines with the
requirement IDs in full and nothing wrapped or cut to 80 columns. Either way every row
that is not a pass or not-applicable shows why (the first line of its message):
an indeterminate MUST row without a reason tells a reader nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ackspec.results import RunResults, Verdict, combine

EXPLAINED = (Verdict.FAIL, Verdict.STALE, Verdict.ERROR, Verdict.DEVIATION, Verdict.INDETERMINATE)
"""Verdicts whose rows carry their reason."""

STYLE = {Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.STALE: "red", Verdict.ERROR: "magenta",
         Verdict.DEVIATION: "yellow", Verdict.INDETERMINATE: "cyan", Verdict.NOT_APPLICABLE: "dim"}


def family_of(requirement: str) -> str:
    parts = requirement.split("-")
    return parts[0] if len(parts) < 2 else f"{parts[0]}-{parts[1]}" if parts[1][:1].isdigit() else parts[0]


@dataclass(frozen=True, slots=True)
class Row:
    requirement: str
    level: str
    verdict: Verdict
    tests: int
    detail: str


def rows_by_family(results: RunResults) -> dict[str, list[Row]]:
    """One row per requirement (its tests' combined verdict), grouped by family, sorted."""
    by_req: dict[str, list[Verdict]] = defaultdict(list)
    levels: dict[str, str] = {}
    messages: dict[str, str] = {}
    for t in results.tests:
        by_req[t.requirement].append(t.verdict)
        levels[t.requirement] = t.level or ""
        if t.verdict in EXPLAINED and t.requirement not in messages and t.message:
            messages[t.requirement] = " ".join(t.message.splitlines()[0].split())
    families: dict[str, list[Row]] = defaultdict(list)
    for req in sorted(by_req):
        verdict = combine(by_req[req])
        detail = messages.get(req, "") if verdict in EXPLAINED else ""
        families[family_of(req)].append(Row(req, levels[req], verdict, len(by_req[req]), detail))
    return families


def print_table(console: Any, results: RunResults, *, plain: bool) -> None:
    """The per-family tables and the summary lines (MUST and other failures named in full)."""
    families = rows_by_family(results)
    if plain:
        _print_plain(console, results, families)
    else:
        _print_rich(console, families)
    rows = [row for family in families.values() for row in family]
    totals: dict[Verdict, int] = defaultdict(int)
    for row in rows:
        totals[row.verdict] += 1
    ordered = sorted(totals.items(), key=lambda kv: kv[0].value)
    must = [r.requirement for r in rows if r.verdict is Verdict.FAIL and r.level.startswith("MUST")]
    other = [r.requirement for r in rows if r.verdict is Verdict.FAIL and not r.level.startswith("MUST")]
    if plain:
        _line(console, f"requirements: {', '.join(f'{n} {v}' for v, n in ordered)}")
    else:
        console.print(f"requirements: {', '.join(f'[{STYLE[v]}]{n} {v}[/]' for v, n in ordered)}")
    if must:
        _line(console, f"MUST failures ({len(must)}): {', '.join(must)}")
    if other:
        _line(console, f"SHOULD/other failures ({len(other)}): {', '.join(other)}")


def _print_rich(console: Any, families: dict[str, list[Row]]) -> None:
    from rich.table import Table  # noqa: PLC0415

    for family, rows in families.items():
        table = Table(title=family, title_justify="left", show_lines=False)
        table.add_column("requirement", no_wrap=True)
        table.add_column("level")
        table.add_column("verdict")
        table.add_column("tests", justify="right")
        table.add_column("detail", overflow="fold")
        for row in rows:
            table.add_row(row.requirement, row.level, f"[{STYLE[row.verdict]}]{row.verdict}[/]", str(row.tests),
                          row.detail)
        console.print(table)


def _print_plain(console: Any, results: RunResults, families: dict[str, list[Row]]) -> None:
    _line(console, f"verdicts of {results.target.label}, run {results.run_id}:")
    width = max((len(row.requirement) for rows in families.values() for row in rows), default=0)
    for family, rows in families.items():
        _line(console, f"{family}:")
        for row in rows:
            detail = f"  {row.detail}" if row.detail else ""
            _line(console, f"  {row.requirement:<{width}}  {row.level:<10} {row.verdict!s:<14} "
                           f"{row.tests:>3} test(s){detail}")


def _line(console: Any, text: str) -> None:
    """A plain line: no markup, no wrapping, nothing cut (``soft_wrap`` leaves long lines whole)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)
