"""The requirement traceability report over one or many run directories.

``build_report(run_dirs, out_dir)`` reads every run's ``results.json`` and histories
(layout: :mod:`ackspec.results.layout`), checks the histories (Spark, or the
single-process checker for small inputs: the same rules), and writes:

- ``report.html``: one self-contained page (inline CSS/JS/images, no network);
- ``report.json`` and ``report.csv``: the same data, for machines;
- ``anomalies.json``: every anomaly the history checks found;
- ``environment.properties`` and ``categories.json`` into each run's ``allure-results/``.

Bad input fails the whole report with one line naming the file (an
:class:`~ackspec.errors.AckspecError`): a report silently covering fewer runs than
asked for would mislead the auditor reading it. Nothing is written in that case.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ackspec.errors import AckspecError
from ackspec.history.anomalies import Anomaly, SendCounts
from ackspec.history.checks import check_histories
from ackspec.history.record import HistoryFormatError, Record
from ackspec.pipeline.allure import write_allure_files
from ackspec.pipeline.report_html import render_html
from ackspec.pipeline.schema import check_parquet, read_run, row_to_record
from ackspec.pipeline.session import get_session, progress
from ackspec.results import ResultsFormatError, RunResults, Verdict, combine, is_failure
from ackspec.results.layout import BENCH_SCHEMA, RunDir, resolve_run_dirs
from ackspec.spec import SpecError, load_catalogue
from ackspec.spec.citations import default_scan_paths, scan

REPORT_SCHEMA = "ackspec.report/1"
NORMATIVE = ("MUST", "MUST-NOT", "SHOULD", "SHOULD-NOT")
SMALL_INPUT_BYTES = 64 * 1024 * 1024
"""Below this much history data (and without ``--master``) the single-process checker is used:
same rules, no Spark start-up (which costs 15-30 s on a 2-core machine)."""


@dataclass(frozen=True, slots=True)
class ReportSummary:
    """What ``build_report`` wrote and the headline numbers, for the caller to print."""

    out_dir: Path
    html: Path
    json: Path
    csv: Path
    runs: int
    targets: tuple[str, ...]
    requirements: int
    cells: int
    failing_cells: int
    anomalies: int
    engine: str
    sends: SendCounts = field(default_factory=SendCounts)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        return [
            f"report: {self.runs} run(s), {len(self.targets)} target(s), {self.requirements} requirement(s), "
            f"{self.cells} cell(s), {self.failing_cells} failing; {self.anomalies} history anomalies "
            f"({self.engine} checker); sends: {self.sends.confirmed} confirmed, {self.sends.failed} failed, "
            f"{self.sends.indeterminate} indeterminate",
            f"report: {self.html}",
        ]


@dataclass(slots=True)
class _Run:
    dir: RunDir
    results: RunResults

    @property
    def target(self) -> str:
        return target_name(self.results)


def target_name(results: RunResults) -> str:
    """The column a run belongs to: the target's label (profile, else URL, and protocol; a client run's library).

    The protocol is part of it: the STOMP and AMQP runs of one broker (one profile) are two
    targets, never one column where the later run hides the earlier one."""
    return results.target.label


# --- loading ----------------------------------------------------------------------------------------


def load_runs(run_dirs: Iterable[str | Path | RunDir]) -> list[_Run]:
    dirs: list[RunDir] = []
    patterns: list[str] = []
    for item in run_dirs:
        if isinstance(item, RunDir):
            dirs.append(item)
        else:
            patterns.append(str(item))
    if patterns:
        dirs.extend(resolve_run_dirs(patterns))
    if not dirs:
        raise AckspecError("no run directory given")
    runs = []
    for run_dir in dirs:
        if not run_dir.results.is_file():
            raise AckspecError(f"{run_dir.root}: not a run directory (no results.json)")
        try:
            runs.append(_Run(run_dir, RunResults.read(run_dir.results)))
        except ResultsFormatError as exc:
            raise AckspecError(str(exc)) from exc
    runs.sort(key=lambda r: (r.results.started, r.results.run_id))
    return runs


def history_bytes(runs: Sequence[_Run]) -> int:
    total = 0
    for run in runs:
        if run.dir.has_parquet():
            total += sum(p.stat().st_size for p in run.dir.histories_parquet.rglob("*.parquet"))
        else:
            total += sum(p.stat().st_size for p in run.dir.history_files())
    return total


def read_records_python(runs: Sequence[_Run]) -> list[Record]:
    """All history records of the runs, read without Spark (strict: errors name file and line)."""
    records: list[Record] = []
    for run in runs:
        if run.dir.has_parquet():
            check_parquet(run.dir.histories_parquet)
            for file in sorted(run.dir.histories_parquet.rglob("*.parquet")):
                partition = dict(part.split("=", 1) for part in file.parent.relative_to(
                    run.dir.histories_parquet).parts if "=" in part)
                try:
                    rows = pq.read_table(file).to_pylist()
                except Exception as exc:
                    raise AckspecError(f"{file}: corrupt Parquet file ({type(exc).__name__}: {exc})") from exc
                for row in rows:
                    row.setdefault("run", partition.get("run"))
                    row.setdefault("target", partition.get("target"))
                    try:
                        records.append(row_to_record(row))
                    except (HistoryFormatError, ValueError) as exc:
                        raise AckspecError(f"{file}: {exc}") from exc
            continue
        for file in run.dir.history_files():
            with file.open(encoding="utf-8") as lines:
                for number, line in enumerate(lines, 1):
                    if not line.strip():
                        continue
                    try:
                        records.append(Record.from_json(line))
                    except HistoryFormatError as exc:
                        raise AckspecError(f"{file}:{number}: {exc}") from exc
    return records


def check_runs(runs: Sequence[_Run], master: str | None, engine: str) -> tuple[list[Anomaly], SendCounts, str]:
    """History anomalies of all runs, with the engine that found them."""
    with_histories = [r for r in runs if r.dir.has_parquet() or r.dir.history_files()]
    if not with_histories:
        return [], SendCounts(), "none"
    if engine == "auto":
        engine = "python" if master is None and history_bytes(with_histories) < SMALL_INPUT_BYTES else "spark"
    if engine == "python":
        progress(f"checking the histories of {len(with_histories)} run(s) (single process)")
        result = check_histories(read_records_python(with_histories))
        return list(result.anomalies), result.sends, "python"
    return check_runs_spark(with_histories, master, small=history_bytes(with_histories) < SMALL_INPUT_BYTES)


def check_runs_spark(runs: Sequence[_Run], master: str | None, *,
                     small: bool = False) -> tuple[list[Anomaly], SendCounts, str]:
    """The Spark engine over the runs' histories: one job; bad records refuse the report, naming the file."""
    from ackspec.pipeline.checks_spark import check_dataframe  # noqa: PLC0415 - PySpark only when used

    progress(f"starting Spark ({master or 'local[*]'})")
    spark = get_session(master, small=small)
    frames = [frame for frame in (read_run(spark, run.dir) for run in runs) if frame is not None]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    progress(f"checking the histories of {len(runs)} run(s) (Spark)")
    try:
        result = check_dataframe(union).collect()
    except Exception as exc:
        if type(exc).__name__ in ("SparkException", "Py4JJavaError", "AnalysisException", "SparkRuntimeException",
                                  "PythonException"):
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            # a Python worker's error ends with its own line (e.g. "ValueError: history record with unknown op")
            first = (lines[-1] if type(exc).__name__ == "PythonException" else lines[0]) if lines \
                else type(exc).__name__
            raise AckspecError(f"Spark could not read the histories: {first[:300]}") from exc
        raise
    if result.problems:
        more = f" (and {len(result.problems) - 1} more file(s))" if len(result.problems) > 1 else ""
        raise AckspecError(result.problems[0].line() + more)
    return list(result.anomalies), result.sends, "spark"


def junit_tests(path: Path) -> set[str]:
    """Test ids (file::name) in a JUnit XML file; unreadable files count as none (the report says so)."""
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError):
        return set()
    names = set()
    for case in tree.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        names.add(f"{classname.replace('.', '/')}.py::{name}" if classname else name)
    return names


def load_bench(runs: Sequence[_Run]) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    for run in runs:
        if not run.dir.bench.is_file():
            continue
        try:
            data = json.loads(run.dir.bench.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AckspecError(f"{run.dir.bench}: not a JSON benchmark file ({exc})") from exc
        if not isinstance(data, dict) or data.get("schema") != BENCH_SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise AckspecError(f"{run.dir.bench}: unknown benchmark schema {found!r} (expected {BENCH_SCHEMA})")
        for figure in data.get("figures", []):
            if isinstance(figure, dict) and isinstance(figure.get("x"), list) and isinstance(figure.get("y"), list):
                figures.append({**figure, "run": run.results.run_id})
    return figures


# --- the report's data ---------------------------------------------------------------------------------


COMPLETED = frozenset({Verdict.PASS, Verdict.STALE})
"""Verdicts of a test that ran to its end: only then has it done the draining its intent declares."""


def judge_anomalies(runs: Sequence[_Run], anomalies: Sequence[Anomaly]) -> dict[Anomaly, tuple[Verdict, str]]:
    """The decisive anomalies that are verdicts, each with its verdict and the reason.

    A decisive anomaly (a loss of a message the test declared it expects delivered) is a
    verdict only when the test that wrote the history ran to its end, i.e. every verdict of
    it in that run is pass (or stale): a test that failed, was not applicable, indeterminate
    or broke may have stopped before it drained, so its losses stay evidence to review.
    The verdict is ``fail``, or ``deviation`` when the run's profile documents a deviation of
    that requirement for that test.
    """
    from ackspec.conformance.target import scope_protocol  # noqa: PLC0415  # as _profile_deviations

    outcomes: dict[tuple[str, str], set[Verdict]] = defaultdict(set)
    for run in runs:
        for result in run.results.tests:
            outcomes[(run.results.run_id, result.test)].add(result.verdict)
    by_run = {run.results.run_id: run for run in runs}
    profiles: dict[str, list[Any]] = {}
    judged: dict[Anomaly, tuple[Verdict, str]] = {}
    for anomaly in anomalies:
        verdicts = outcomes.get((anomaly.run, anomaly.test))
        if not anomaly.decisive or not verdicts or not verdicts <= COMPLETED or anomaly.run not in by_run:
            continue
        run = by_run[anomaly.run]
        profile = run.results.target.profile or ""
        if profile not in profiles:
            profiles[profile] = _profile_deviations(profile)
        scope = scope_protocol(run.results.target.protocol, run.results.target.url)
        reason = next((d.reason or "documented deviation" for d in profiles[profile]
                       if d.requirement == anomaly.requirement and d.applies_to(anomaly.test, scope)), None)
        judged[anomaly] = ((Verdict.DEVIATION, f"documented deviation: {reason}") if reason is not None
                           else (Verdict.FAIL, f"{anomaly.detail} (history check)"))
    return judged


def _profile_deviations(profile: str | None) -> list[Any]:
    """The known deviations of a target profile; none when there is no profile or it cannot be read."""
    if not profile:
        return []
    from ackspec.conformance.target import ProfileError, deviations_of, load_profile  # noqa: PLC0415

    try:
        return deviations_of(load_profile(profile))
    except ProfileError:
        return []


@dataclass(slots=True)
class _Evidence:
    """What the matrix's cells are built from: results by (requirement, target) and run, and the
    anomalies, by cell and judged (a decisive anomaly of a test that ran to its end is a verdict)."""

    by_run: dict[str, _Run]
    cell_runs: dict[tuple[str, str], dict[str, list[Any]]]
    anomalies_by_cell: dict[tuple[str, str], list[Anomaly]]
    judged: dict[Anomaly, tuple[Verdict, str]]
    decided: dict[tuple[str, str], dict[str, list[Verdict]]]
    tests_without_requirement: set[str]
    all_result_tests: set[str]

    def anomaly_dict(self, anomaly: Anomaly) -> dict[str, Any]:
        """An anomaly as the report ships it: with its verdict when judged, or why it is only evidence."""
        data = anomaly.to_dict()
        if anomaly in self.judged:
            data["verdict"], data["reason"] = str(self.judged[anomaly][0]), self.judged[anomaly][1]
        elif anomaly.decisive:
            data["reason"] = "review: the test did not run to its end (or has no result), so it may not have drained"
        return data

    def started(self, run_id: str) -> tuple[str, str]:
        return self.by_run[run_id].results.started, run_id


def gather_evidence(runs: Sequence[_Run], anomalies: Sequence[Anomaly]) -> _Evidence:
    """Index the runs' results and the anomalies by cell (requirement, target) and run."""
    cell_runs: dict[tuple[str, str], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    tests_without_requirement: set[str] = set()
    all_result_tests: set[str] = set()
    for run in runs:
        for result in run.results.tests:
            all_result_tests.add(result.test)
            if not result.requirement:
                tests_without_requirement.add(result.test)
                continue
            cell_runs[(result.requirement, run.target)][run.results.run_id].append(result)
    run_target = {run.results.run_id: run.target for run in runs}
    anomalies_by_cell: dict[tuple[str, str], list[Anomaly]] = defaultdict(list)
    for anomaly in anomalies:
        anomalies_by_cell[(anomaly.requirement, run_target.get(anomaly.run, "?"))].append(anomaly)
    judged = judge_anomalies(runs, anomalies)
    decided: dict[tuple[str, str], dict[str, list[Verdict]]] = defaultdict(lambda: defaultdict(list))
    for anomaly, (verdict, _) in judged.items():
        decided[(anomaly.requirement, run_target.get(anomaly.run, "?"))][anomaly.run].append(verdict)
    return _Evidence({run.results.run_id: run for run in runs}, cell_runs, anomalies_by_cell, judged, decided,
                     tests_without_requirement, all_result_tests)


def _timeline(evidence: _Evidence, cell: tuple[str, str], ordered: list[str]) -> list[dict[str, Any]]:
    """The cell's verdict in each run that judged it, in time order."""
    per_run, from_history = evidence.cell_runs.get(cell, {}), evidence.decided.get(cell, {})
    timeline = []
    for rid in ordered:
        results = evidence.by_run[rid].results
        verdict = combine([*(t.verdict for t in per_run.get(rid, [])), *from_history.get(rid, [])])
        timeline.append({"run": rid, "started": results.started, "code_version": results.code_version,
                         "verdict": str(verdict)})
    return timeline


def _changes(timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the cell's verdict changed from one run to the next."""
    return [{"run": b["run"], "started": b["started"], "from": a["verdict"], "to": b["verdict"],
             "code_version": b["code_version"]}
            for a, b in itertools.pairwise(timeline) if a["verdict"] != b["verdict"]]


def _flaky(evidence: _Evidence, cell: tuple[str, str], ordered: list[str]) -> list[dict[str, Any]]:
    """The code versions under which the cell's tests both passed and failed."""
    per_run = evidence.cell_runs.get(cell, {})
    by_code: dict[str, set[str]] = defaultdict(set)
    for rid in ordered:
        for t in per_run.get(rid, []):
            by_code[evidence.by_run[rid].results.code_version].add(str(t.verdict))
    return [{"requirement": cell[0], "target": cell[1], "code_version": code}
            for code, verdicts in by_code.items() if "pass" in verdicts and "fail" in verdicts]


def _last_cell(evidence: _Evidence, cell: tuple[str, str], last_id: str,
               timeline: list[dict[str, Any]]) -> dict[str, Any]:
    """A judged cell as its last run left it: verdict, tests, failing operations and anomalies."""
    requirement, target = cell
    last = evidence.by_run[last_id].results
    entries = evidence.cell_runs.get(cell, {}).get(last_id, [])
    judged = evidence.judged
    verdict = combine([*(t.verdict for t in entries), *evidence.decided.get(cell, {}).get(last_id, [])])
    cell_anomalies = [a for a in evidence.anomalies_by_cell.get(cell, []) if a.run == last_id]
    data: dict[str, Any] = {
        "requirement": requirement, "target": target, "verdict": str(verdict),
        "failure": is_failure(verdict), "last_run": last_id, "last_started": last.started,
        "code_version": last.code_version, "seed": _first(t.seed for t in entries) or last.seed,
        "tests": [{"test": t.test, "verdict": str(t.verdict), "seed": t.seed, "duration": t.duration,
                   "message": t.message, "history": t.history, "operations": list(t.operations)}
                  for t in entries],
        "failing_operations": sorted({op for t in entries if is_failure(t.verdict) for op in t.operations}
                                     | {op for a in cell_anomalies if a in judged
                                        and is_failure(judged[a][0]) for op in a.operations}),
        "anomalies": [evidence.anomaly_dict(a) for a in cell_anomalies],
        "timeline": timeline,
    }
    decisive = [a for a in cell_anomalies if a in judged]
    if decisive:
        tests = sorted({a.test for a in decisive})
        data["note"] = (f"the history checks decided it: {len(decisive)} message(s) that "
                        f"{', '.join(tests)} declared it expects delivered were never consumed")
    return data


def judged_cells(evidence: _Evidence) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The cells some test or decisive anomaly judged, with the verdict changes and the flaky ones."""
    cells: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    flaky: list[dict[str, Any]] = []
    for cell in sorted(set(evidence.cell_runs) | set(evidence.decided)):
        ordered = sorted(set(evidence.cell_runs.get(cell, {})) | set(evidence.decided.get(cell, {})),
                         key=evidence.started)
        timeline = _timeline(evidence, cell, ordered)
        flaky.extend(_flaky(evidence, cell, ordered))
        changes = _changes(timeline)
        if changes:
            history.append({"requirement": cell[0], "target": cell[1], "changes": changes})
        cells.append(_last_cell(evidence, cell, ordered[-1], timeline))
    return cells, history, flaky


def history_only_cells(evidence: _Evidence) -> list[dict[str, Any]]:
    """Cells of requirements no result mentions, found by the history checks only: still shown in the matrix.

    No test judged them: the anomaly is evidence to review, not a verdict (a test may
    deliberately leave messages unconsumed, which looks like loss to the history check)."""
    by_run = evidence.by_run
    cells = []
    for (requirement, target), everything in sorted(evidence.anomalies_by_cell.items()):
        if (requirement, target) in evidence.cell_runs or (requirement, target) in evidence.decided:
            continue
        last_run = max({a.run for a in everything},
                       key=lambda rid: (by_run[rid].results.started, rid) if rid in by_run else ("", rid))
        found = [a for a in everything if a.run == last_run]
        cells.append({"requirement": requirement, "target": target, "verdict": str(Verdict.INDETERMINATE),
                      "failure": False, "last_run": last_run, "last_started": by_run[last_run].results.started
                      if last_run in by_run else "", "code_version": "", "seed": None, "tests": [],
                      "failing_operations": sorted({op for a in found for op in a.operations}),
                      "anomalies": [evidence.anomaly_dict(a) for a in found], "timeline": [],
                      "note": "found by the history checks only (no test result): review the operations"})
    return cells


def requirement_entries(cells: Sequence[dict[str, Any]], catalogue: Any) -> dict[str, dict[str, Any]]:
    """Every requirement of the catalogue and every one a cell cites (unknown ones marked so), by id."""
    requirements: dict[str, dict[str, Any]] = {}
    known = set(catalogue.ids) if catalogue is not None else set()
    cited = {c["requirement"] for c in cells}
    for rid in sorted(cited | known):
        if catalogue is not None and rid in catalogue:
            req = catalogue.get(rid)
            requirements[rid] = {"id": rid, "title": req.title, "rule": req.rule, "level": str(req.level),
                                 "family": req.family, "source": str(req.source), "role": str(req.role),
                                 "protocols": list(req.protocols), "testable": req.testable, "known": True}
        elif rid in cited:
            requirements[rid] = {"id": rid, "title": "(not in the catalogue)", "rule": "", "level": "",
                                 "family": "unknown", "source": "", "role": "", "protocols": [],
                                 "testable": True, "known": False}
    return requirements


def _normative(entry: dict[str, Any]) -> bool:
    return bool(entry["known"]) and entry["level"] in NORMATIVE


def coverage(runs: Sequence[_Run], evidence: _Evidence, cells: Sequence[dict[str, Any]],
             requirements: dict[str, dict[str, Any]], targets: Sequence[str], catalogue: Any) -> dict[str, Any]:
    """What is not covered: normative requirements without a test, tests without a requirement, and more."""
    tested = {c["requirement"] for c in cells if c["tests"]}
    statically_cited = _static_citations()
    untested = [rid for rid, r in requirements.items()
                if _normative(r) and r["testable"] and rid not in tested and rid not in statically_cited]
    cited_not_run = [rid for rid, r in requirements.items()
                     if _normative(r) and rid in statically_cited and rid not in tested]
    junit_only: set[str] = set()
    for run in runs:
        if run.dir.junit.is_file():
            junit_only |= {t for t in junit_tests(run.dir.junit)
                           if not any(t.endswith(r.split("::", 1)[-1]) for r in evidence.all_result_tests)}
    client_targets = {run.target for run in runs if run.results.target.is_client}
    ran = {(c["requirement"], c["target"]) for c in cells if c["tests"]}
    never_run = {target: [rid for rid, r in requirements.items()
                          if _normative(r) and r["testable"]
                          and _role_fits(r["role"], target in client_targets) and (rid, target) not in ran]
                 for target in targets}
    return {
        "normative_without_test": untested,
        "cited_but_never_run": cited_not_run,
        "tests_without_requirement": sorted(evidence.tests_without_requirement | junit_only),
        "never_run_against_target": never_run,
        "unknown_requirements": sorted(rid for rid, r in requirements.items() if not r["known"]),
        "catalogue_size": len(set(catalogue.ids) if catalogue is not None else set()),
        "titles": {rid: r["title"] for rid, r in requirements.items()},
        "levels": {rid: r["level"] for rid, r in requirements.items()},
    }


def run_entry(run: _Run) -> dict[str, Any]:
    """One run as the report lists it."""
    r = run.results
    return {"run": r.run_id, "started": r.started, "finished": r.finished,
            "target": run.target, "url": r.target.url, "protocol": r.target.protocol,
            "adapter": r.target.adapter, "kind": r.target.kind,
            "library": r.target.library, "version": r.target.version,
            "broker": r.target.broker, "profile": r.target.profile,
            "code_version": r.code_version,
            "seed": r.seed, "strict": r.strict, "tests": len(r.tests),
            "interrupted": r.interrupted, "dir": str(run.dir.root)}


def build_data(runs: Sequence[_Run], anomalies: Sequence[Anomaly], catalogue: Any) -> dict[str, Any]:
    """The report's data: runs, targets (clients after brokers), the matrix's cells, coverage, history."""
    client_targets = {run.target for run in runs if run.results.target.is_client}
    targets = sorted({run.target for run in runs}, key=lambda t: (t in client_targets, t))
    evidence = gather_evidence(runs, anomalies)
    cells, history, flaky = judged_cells(evidence)
    cells.extend(history_only_cells(evidence))
    requirements = requirement_entries(cells, catalogue)
    # only requirements that appear in the matrix are shipped in full; the rest by id in coverage
    shown = {c["requirement"] for c in cells}
    return {
        "schema": REPORT_SCHEMA,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [run_entry(r) for r in runs],
        "targets": targets,
        "requirements": {rid: r for rid, r in requirements.items() if rid in shown},
        "cells": cells,
        "coverage": coverage(runs, evidence, cells, requirements, targets, catalogue),
        "history": history,
        "flaky": flaky,
        "anomalies": [evidence.anomaly_dict(a) for a in anomalies],
    }


def _role_fits(role: str, client: bool) -> bool:
    """Whether a requirement of ``role`` is judged on a client column (client, both) or a broker column
    (all but client): a client-side rule never runs against a broker, nor a broker rule against a client."""
    return role in ("client", "both") if client else role != "client"


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _static_citations() -> set[str]:
    try:
        return {c.requirement for c in scan(default_scan_paths())}
    except Exception:  # the scan is a bonus; the results are the evidence
        return set()


def load_catalogue_or_none() -> Any:
    try:
        return load_catalogue()
    except SpecError as exc:
        raise AckspecError(f"requirement catalogue: {exc}") from exc


# --- writing ------------------------------------------------------------------------------------------------

CSV_COLUMNS = ("requirement", "level", "family", "target", "verdict", "tests", "seed", "last_run", "last_started",
               "code_version", "failing_operations", "anomalies")


def write_csv(data: dict[str, Any], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for cell in data["cells"]:
        req = data["requirements"].get(cell["requirement"], {})
        writer.writerow([cell["requirement"], req.get("level", ""), req.get("family", ""), cell["target"],
                         cell["verdict"], " ".join(t["test"] for t in cell["tests"]),
                         "" if cell["seed"] is None else cell["seed"], cell["last_run"], cell["last_started"],
                         cell["code_version"], " ".join(str(o) for o in cell["failing_operations"]),
                         len(cell["anomalies"])])
    path.write_text(buffer.getvalue(), encoding="utf-8")


def build_report(run_dirs: Sequence[str | Path | RunDir], out_dir: str | Path, master: str | None = None, *,
                 engine: str = "auto") -> ReportSummary:
    """Build the report of ``run_dirs`` into ``out_dir``; see the module docstring.

    ``engine``: ``auto`` (Spark for big inputs or with ``master``), ``spark`` or ``python``.
    Raises :class:`AckspecError` (one line, naming the file) on bad input; writes nothing then.
    """
    started = time.monotonic()
    if engine not in ("auto", "spark", "python"):
        raise AckspecError(f"unknown engine {engine!r} (auto, spark or python)")
    runs = load_runs(run_dirs)
    progress(f"report over {len(runs)} run(s): {', '.join(r.results.run_id for r in runs[:5])}"
             + (" ..." if len(runs) > 5 else ""))
    catalogue = load_catalogue_or_none()
    figures = load_bench(runs)
    anomalies, sends, used = check_runs(runs, master, engine)
    data = build_data(runs, anomalies, catalogue)
    data["sends"] = asdict(sends)
    data["engine"] = used
    data["figures"] = figures
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html_path, json_path, csv_path = out / "report.html", out / "report.json", out / "report.csv"
    json_path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str), encoding="utf-8")
    write_csv(data, csv_path)
    (out / "anomalies.json").write_text(json.dumps(data["anomalies"], indent=1), encoding="utf-8")
    html_path.write_text(render_html(data), encoding="utf-8")
    for run in runs:
        write_allure_files(run.dir, run.results, catalogue)
    targets = tuple(data["targets"])
    summary = ReportSummary(
        out_dir=out, html=html_path, json=json_path, csv=csv_path, runs=len(runs), targets=targets,
        requirements=len({c["requirement"] for c in data["cells"]}), cells=len(data["cells"]),
        failing_cells=sum(1 for c in data["cells"] if c["failure"]), anomalies=len(anomalies), engine=used,
        sends=sends, seconds=time.monotonic() - started)
    if os.environ.get("ACKSPEC_QUIET") != "1":
        progress(f"report written to {out} in {summary.seconds:.1f} s")
    return summary
