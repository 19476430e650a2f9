"""The traceability report over fabricated run directories, and its bad-input cases."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from pathlib import Path

import pytest

from ackspec.cli import main
from ackspec.errors import AckspecError
from ackspec.history.anomalies import REQUIREMENTS, AnomalyKind
from ackspec.pipeline.report import build_report
from ackspec.pipeline.schema import convert_run
from ackspec.pipeline.synthetic import SyntheticParams, generate
from ackspec.results import RunResults, TargetInfo, Verdict
from ackspec.results import TestResult as ResultEntry
from ackspec.results.layout import BENCH_SCHEMA, RunDir

REQ_PASS = "JMS-3.4.7-REDELIVERED-SET"
REQ_FLIP = "JMS-6.2.9.1-PER-PRODUCER-ORDER"


def make_run(root: Path, run_id: str, started: str, flip: Verdict, *, code: str = "abc123",
             profile: str = "reference", inject: AnomalyKind | None = AnomalyKind.LOST) -> RunDir:
    run = RunDir(root / run_id)
    test_pass = "tests/conformance/test_ack.py::test_redelivered_flag"
    test_flip = "tests/conformance/test_order.py::test_per_producer_order"
    history = generate(SyntheticParams(messages=12, ack_mode="client", inject=inject), seed=3, run=run_id,
                       test=test_flip, target=profile)
    run.histories.mkdir(parents=True)
    run.history_path(test_flip).write_text("".join(r.to_json() + "\n" for r in history.records), encoding="utf-8")
    results = RunResults(
        run_id=run_id, started=started, finished=started, code_version=code, seed=42,
        target=TargetInfo(url="stomp://127.0.0.1:61613", profile=profile, protocol="stomp", adapter="stomp.py"),
        tests=(
            ResultEntry(requirement=REQ_PASS, test=test_pass, verdict=Verdict.PASS, level="MUST", seed=42),
            ResultEntry(requirement=REQ_FLIP, test=test_flip, verdict=flip, level="MUST", seed=42,
                       message="order broken" if flip is Verdict.FAIL else "",
                       history=f"histories/{run.history_path(test_flip).name}",
                       operations=(5, 9) if flip is Verdict.FAIL else ()),
            ResultEntry(requirement="", test="tests/conformance/test_misc.py::test_uncited", verdict=Verdict.PASS),
        ),
    )
    results.write(run.results)
    run.bench.write_text(json.dumps({"schema": BENCH_SCHEMA, "figures": [
        {"name": "send throughput", "unit": "msg/s", "x_label": "window", "x": [1, 10, 50],
         "y": [900, 7000, 21000], "series": profile}]}), encoding="utf-8")
    return run


@pytest.fixture()
def runs(tmp_path: Path) -> list[RunDir]:
    return [
        make_run(tmp_path, "run1", "2026-11-20T10:00:00+00:00", Verdict.PASS),
        make_run(tmp_path, "run2", "2026-11-21T10:00:00+00:00", Verdict.FAIL),
        make_run(tmp_path, "run3", "2026-11-22T10:00:00+00:00", Verdict.PASS, code="def456", profile="rabbitmq-3.10",
                 inject=None),
    ]


def test_report_matrix_coverage_history_and_outputs(runs: list[RunDir], tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = build_report([str(tmp_path / "run*")], out, engine="python")
    assert summary.runs == 3
    assert summary.targets == ("rabbitmq-3.10 (STOMP)", "reference (STOMP)")
    data = json.loads(summary.json.read_text())
    cells = {(c["requirement"], c["target"]): c for c in data["cells"]}
    flip = cells[(REQ_FLIP, "reference (STOMP)")]
    assert flip["verdict"] == "fail" and flip["last_run"] == "run2" and flip["seed"] == 42
    assert flip["failing_operations"] == [5, 9]
    assert [t["test"] for t in flip["tests"]] == ["tests/conformance/test_order.py::test_per_producer_order"]
    assert cells[(REQ_PASS, "rabbitmq-3.10 (STOMP)")]["verdict"] == "pass"
    # the injected loss of the last run is found and attached to its requirement's cell
    lost = cells[(REQUIREMENTS[AnomalyKind.LOST], "reference (STOMP)")]
    assert [a["kind"] for a in lost["anomalies"]] == ["lost"] and lost["anomalies"][0]["run"] == "run2"
    assert lost["verdict"] == "indeterminate"
    assert data["flaky"] == [{"requirement": REQ_FLIP, "target": "reference (STOMP)", "code_version": "abc123"}]
    assert data["history"][0]["changes"][0]["from"] == "pass" and data["history"][0]["changes"][0]["to"] == "fail"
    coverage = data["coverage"]
    assert "tests/conformance/test_misc.py::test_uncited" in coverage["tests_without_requirement"]
    assert "JMS-3.5.11-DELIVERY-COUNT-FIRST-ONE" in coverage["never_run_against_target"]["rabbitmq-3.10 (STOMP)"]
    assert REQ_FLIP not in coverage["never_run_against_target"]["rabbitmq-3.10 (STOMP)"]
    assert len(coverage["normative_without_test"]) > 0
    rows = list(csv.DictReader(summary.csv.open()))
    assert {(r["requirement"], r["target"], r["verdict"]) for r in rows} >= {(REQ_FLIP, "reference (STOMP)", "fail")}
    page = summary.html.read_text()
    assert "data:image/png;base64," in page and "http://" not in page and "https://" not in page
    for run in runs:
        env = (run.allure_results / "environment.properties").read_text()
        assert "target.url=stomp\\://127.0.0.1\\:61613" in env
        categories = json.loads((run.allure_results / "categories.json").read_text())
        matching = [c["name"] for c in categories
                    if "messageRegex" in c and re.match(c["messageRegex"], f"[{REQ_FLIP}] order broken")]
        assert len(matching) == 1 and matching[0].startswith("jms-ordering")


def test_spark_engine_gives_the_same_report(runs: list[RunDir], tmp_path: Path, spark: object) -> None:
    python = build_report(runs, tmp_path / "py", engine="python")
    with_spark = build_report(runs, tmp_path / "spark", engine="spark")
    assert with_spark.engine == "spark"
    a = json.loads(python.json.read_text())
    b = json.loads(with_spark.json.read_text())
    assert a["anomalies"] == b["anomalies"] and a["cells"] == b["cells"] and a["sends"] == b["sends"]


def cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["report", *args])
    return code, err.getvalue()


def test_missing_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, err = cli(str(tmp_path / "nope"))
    assert code == 2
    assert err.strip().count("\n") == 0 and "nope: no such run directory" in err


def test_glob_matching_nothing(tmp_path: Path) -> None:
    code, err = cli(str(tmp_path / "none-*"))
    assert code == 2 and "no run directory matches" in err


def test_corrupt_results_json_names_the_file(runs: list[RunDir]) -> None:
    runs[1].results.write_text("{not json", encoding="utf-8")
    code, err = cli(*(str(r.root) for r in runs), "--out", str(runs[0].root / "x"))
    assert code == 2 and str(runs[1].results) in err and "not a JSON results file" in err
    assert not (runs[0].root / "x").exists()  # nothing written: the report fails whole


def test_unknown_results_schema(runs: list[RunDir]) -> None:
    runs[0].results.write_text(json.dumps({"schema": "ackspec.results/9"}), encoding="utf-8")
    code, err = cli(str(runs[0].root))
    assert code == 2 and "unknown results schema 'ackspec.results/9'" in err


def test_unknown_history_schema_version_names_the_file_and_line(runs: list[RunDir]) -> None:
    file = runs[0].history_files()[0]
    file.write_text(file.read_text() + '{"v": 7, "run": "r"}\n', encoding="utf-8")
    with pytest.raises(AckspecError, match=rf"{file.name}:\d+: history schema version 7"):
        build_report(runs, runs[0].root / "r", engine="python")


def test_corrupt_parquet_names_the_file(runs: list[RunDir], spark: object) -> None:
    convert_run(spark, runs[0])
    victim = sorted(runs[0].histories_parquet.rglob("*.parquet"))[0]
    victim.write_bytes(b"PAR1 this is not parquet")
    for engine in ("python", "spark"):
        with pytest.raises(AckspecError, match="corrupt Parquet file"):
            build_report(runs, runs[0].root / "r", engine=engine)


def test_unknown_history_version_in_jsonl_with_spark(runs: list[RunDir], spark: object) -> None:
    file = runs[0].history_files()[0]
    file.write_text(file.read_text() + '{"v": 7, "run": "r", "index": 1, "type": "ok", "op": "send"}\n')
    with pytest.raises(AckspecError, match="history schema version 7 is not supported"):
        build_report(runs, runs[0].root / "r", engine="spark")
