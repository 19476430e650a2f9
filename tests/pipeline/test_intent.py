"""Intent records decide losses: declared-left messages are not flagged, an expected message that never
arrived is a decisive loss (a fail in the report when its test ran to its end), an indeterminate send is
never lost, histories without intent keep the old behaviour; Spark and Python agree on every case."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ackspec.conformance.target import KnownDeviation
from ackspec.history.anomalies import REQUIREMENTS, AnomalyKind
from ackspec.history.checks import check_histories
from ackspec.history.record import INTENT_KEY, Intent, Op, Record, RecordType
from ackspec.pipeline import report as report_module
from ackspec.pipeline.checks_spark import check_histories_spark
from ackspec.pipeline.report import build_report
from ackspec.pipeline.schema import records_dataframe
from ackspec.pipeline.synthetic import generate_suite
from ackspec.results import RunResults, TargetInfo, Verdict
from ackspec.results import TestResult as ResultEntry
from ackspec.results.layout import RunDir

Q = "/queue/q"
Q2 = "/queue/other"
LOST = REQUIREMENTS[AnomalyKind.LOST]


class History:
    """A hand-written history of one test."""

    def __init__(self, test: str, run: str = "r") -> None:
        self.test, self.run = test, run
        self.records: list[Record] = []

    def add(self, type: RecordType, op: Op, process: str = "c1", **fields: Any) -> int:
        index = len(self.records)
        self.records.append(Record(run=self.run, index=index, time_ns=index, type=type, op=op, process=process,
                                   test=self.test, target="reference", **fields))
        return index

    def intent(self, expect: str, type: RecordType = RecordType.OK, **scope: Any) -> int:
        return self.add(type, Op.EXPECT, "harness", value={INTENT_KEY: expect}, **scope)

    def send(self, seq: int, outcome: RecordType | None = RecordType.OK, *, destination: str = Q,
             producer: str = "p") -> list[int]:
        common = {"destination": destination, "producer": producer, "seq": seq}
        ops = [self.add(RecordType.INVOKE, Op.SEND, "p1", **common)]
        if outcome is not None:
            ops.append(self.add(outcome, Op.SEND, "p1", **common))
        return ops

    def deliver(self, seq: int, *, destination: str = Q, producer: str = "p") -> int:
        return self.add(RecordType.OK, Op.RECEIVE, "c1", destination=destination, producer=producer, seq=seq,
                        subscription="s", ack_mode="auto", redelivered=False, delivery_count=1)


Expected = list[tuple[str | None, int, bool]]  # (destination, seq, decisive) of each lost anomaly


def declared_left_not_flagged() -> tuple[History, Expected]:
    h = History("declared_left_not_flagged")
    h.intent(Intent.DELIVERED)
    h.send(1)
    h.send(2)
    h.deliver(1)
    h.intent(Intent.LEFT, destination=Q, seq=2)  # declared at the end: position does not matter
    return h, []


def undeclared_lost_is_decisive() -> tuple[History, Expected]:
    h = History("undeclared_lost_is_decisive")
    h.intent(Intent.DELIVERED)
    h.send(1)
    h.send(2)
    h.deliver(1)
    return h, [(Q, 2, True)]


def indeterminate_send_is_never_lost() -> tuple[History, Expected]:
    h = History("indeterminate_send_is_never_lost")
    h.intent(Intent.DELIVERED)
    h.send(1, RecordType.INFO)  # the receipt never came
    h.send(2, None)  # never completed
    return h, []


def old_format_history_unchanged() -> tuple[History, Expected]:
    h = History("old_format_history_unchanged")
    h.send(1)
    return h, [(Q, 1, False)]


def dropped_destination_only() -> tuple[History, Expected]:
    h = History("dropped_destination_only")
    h.intent(Intent.DELIVERED)
    h.intent(Intent.DROPPED, destination=Q2)  # e.g. NACKed to a dead-letter queue nobody drains
    h.send(1, destination=Q2)
    h.send(2)
    return h, [(Q, 2, True)]


def left_wins_over_delivered() -> tuple[History, Expected]:
    h = History("left_wins_over_delivered")
    h.intent(Intent.DELIVERED, destination=Q, seq=1)
    h.intent(Intent.LEFT, destination=Q)
    h.send(1)
    return h, []


def left_alone_declares_no_delivery() -> tuple[History, Expected]:
    h = History("left_alone_declares_no_delivery")
    h.intent(Intent.LEFT, seq=1)
    h.send(1)
    h.send(2)
    return h, [(Q, 2, False)]


def producer_scope_and_unknown_intent() -> tuple[History, Expected]:
    h = History("producer_scope_and_unknown_intent")
    h.intent(Intent.DELIVERED)
    h.intent(Intent.LEFT, producer="p2")
    h.intent("some-future-intent", destination=Q2)  # unknown intents exempt: never a false fail
    h.send(1)
    h.send(1, producer="p2")
    h.send(3, destination=Q2)
    return h, [(Q, 1, True)]


def intent_after_the_sends_and_invoke_only_intents() -> tuple[History, Expected]:
    h = History("intent_after_the_sends_and_invoke_only_intents")
    h.send(1)
    h.intent(Intent.LEFT, RecordType.INVOKE, seq=1)  # only ok records declare
    h.intent(Intent.DELIVERED, destination=Q)
    return h, [(Q, 1, True)]


CASES: list[Callable[[], tuple[History, Expected]]] = [
    declared_left_not_flagged, undeclared_lost_is_decisive, indeterminate_send_is_never_lost,
    old_format_history_unchanged, dropped_destination_only, left_wins_over_delivered,
    left_alone_declares_no_delivery, producer_scope_and_unknown_intent,
    intent_after_the_sends_and_invoke_only_intents,
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_python_checker_applies_intent(case: Callable[[], tuple[History, Expected]]) -> None:
    h, expected = case()
    result = check_histories(h.records)
    assert [(a.destination, a.seq, a.decisive) for a in result.anomalies] == expected
    assert all(a.kind is AnomalyKind.LOST for a in result.anomalies)
    for anomaly in result.anomalies:
        if anomaly.decisive:  # the operations name the sends and the intent that expects the message
            assert any(h.records[i].op is Op.EXPECT for i in anomaly.operations)
            assert "declared it expects it delivered" in anomaly.detail


def test_indeterminate_sends_are_counted_apart_under_intent() -> None:
    h, _ = indeterminate_send_is_never_lost()
    assert check_histories(h.records).sends.indeterminate == 2


def test_undeclared_lost_ops_are_sends_plus_intent() -> None:
    h, _ = undeclared_lost_is_decisive()
    (anomaly,) = check_histories(h.records).anomalies
    assert anomaly.operations == (0, 3, 4)  # intent, send invoke, send ok
    assert anomaly.to_dict()["decisive"] is True


def with_random_intents(records: list[Record], rng: random.Random) -> list[Record]:
    """Random intent records (any scope, any kind) appended to a generated history."""
    keys = sorted({(r.destination, r.producer, r.seq) for r in records if r.op is Op.SEND and r.seq is not None},
                  key=str)
    last = max(r.index for r in records)
    extra: list[Record] = []
    base = records[0]
    if rng.random() < 0.8:
        extra.append(Record(run=base.run, index=last + 1 + len(extra), time_ns=0, type=RecordType.OK,
                            op=Op.EXPECT, process="harness", test=base.test, value={INTENT_KEY: "delivered"}))
    for _ in range(rng.randint(0, 3)):
        destination, producer, seq = rng.choice(keys) if keys else (None, None, None)
        extra.append(Record(run=base.run, index=last + 1 + len(extra), time_ns=0, type=RecordType.OK,
                            op=Op.EXPECT, process="harness", test=base.test,
                            destination=destination if rng.random() < 0.7 else None,
                            producer=producer if rng.random() < 0.3 else None,
                            seq=seq if rng.random() < 0.6 else None,
                            value={INTENT_KEY: rng.choice(["delivered", "left", "dropped"])}))
    return records + extra


def test_spark_agrees_with_python_on_intent_cases_and_random_intents(spark: Any) -> None:
    records = [r for case in CASES for r in case()[0].records]
    rng = random.Random(20261122)
    for history in generate_suite(24, seed=7, anomaly_rate=0.8):
        records.extend(with_random_intents(list(history.records), rng))
    python = check_histories(records)
    found = check_histories_spark(records_dataframe(spark, records))
    assert found.anomalies == python.anomalies
    assert found.sends == python.sends
    lost = [a for a in python.anomalies if a.kind is AnomalyKind.LOST]
    assert any(a.decisive for a in lost) and any(not a.decisive for a in lost)  # both kinds exercised
    by_test = {case()[0].test: case()[1] for case in CASES}
    for test, expected in by_test.items():
        assert [(a.destination, a.seq, a.decisive) for a in found.anomalies if a.test == test] == expected


# --- the report: decisive losses are verdicts only for tests that ran to their end -------------------------


def write_run(root: Path, histories: list[tuple[History, Verdict]], *, profile: str = "reference") -> RunDir:
    run = RunDir(root)
    run.histories.mkdir(parents=True)
    entries = []
    for h, verdict in histories:
        path = run.history_path(h.test)
        path.write_text("".join(r.to_json() + "\n" for r in h.records), encoding="utf-8")
        entries.append(ResultEntry(requirement="STOMP-ACK-AUTO", test=h.test, verdict=verdict, level="MUST",
                                   history=f"histories/{path.name}"))
    RunResults(run_id="r", started="2026-11-22T10:00:00+00:00", finished="2026-11-22T10:00:01+00:00",
               code_version="x", target=TargetInfo(url="reference://embedded", profile=profile, protocol="stomp"),
               tests=tuple(entries)).write(run.results)
    return run


def lost_cell(summary: Any) -> dict[str, Any]:
    data = json.loads(summary.json.read_text())
    (cell,) = [c for c in data["cells"] if c["requirement"] == LOST]
    assert isinstance(cell, dict)
    return cell


def test_report_fails_the_cell_of_an_expected_message_never_consumed(tmp_path: Path) -> None:
    h, _ = undeclared_lost_is_decisive()
    summary = build_report([write_run(tmp_path / "run", [(h, Verdict.PASS)])], tmp_path / "out", engine="python")
    cell = lost_cell(summary)
    assert cell["verdict"] == "fail" and cell["failure"] is True
    assert cell["failing_operations"] == [0, 3, 4]
    assert cell["anomalies"][0]["verdict"] == "fail" and "declared" in cell["note"]
    assert summary.failing_cells == 1


def test_report_keeps_losses_of_a_test_that_stopped_early_for_review(tmp_path: Path) -> None:
    h, _ = undeclared_lost_is_decisive()  # the test failed before it could drain: not decisive
    summary = build_report([write_run(tmp_path / "run", [(h, Verdict.FAIL)])], tmp_path / "out", engine="python")
    cell = lost_cell(summary)
    assert cell["verdict"] == "indeterminate" and cell["failure"] is False
    assert "verdict" not in cell["anomalies"][0] and cell["anomalies"][0]["reason"].startswith("review")


def test_report_old_format_history_unchanged(tmp_path: Path) -> None:
    h, _ = old_format_history_unchanged()
    summary = build_report([write_run(tmp_path / "run", [(h, Verdict.PASS)])], tmp_path / "out", engine="python")
    cell = lost_cell(summary)
    assert cell["verdict"] == "indeterminate" and cell["failure"] is False and "review" in cell["note"]
    assert cell["anomalies"][0]["decisive"] is False


def test_report_declared_left_and_indeterminate_make_no_cell(tmp_path: Path) -> None:
    histories = [(declared_left_not_flagged()[0], Verdict.PASS), (indeterminate_send_is_never_lost()[0], Verdict.PASS)]
    summary = build_report([write_run(tmp_path / "run", histories)], tmp_path / "out", engine="python")
    data = json.loads(summary.json.read_text())
    assert data["anomalies"] == [] and not [c for c in data["cells"] if c["requirement"] == LOST]


def test_report_documented_deviation_is_a_deviation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "_profile_deviations",
                        lambda profile: [KnownDeviation(LOST, "drops what it was sent", test="*undeclared*")])
    h, _ = undeclared_lost_is_decisive()
    summary = build_report([write_run(tmp_path / "run", [(h, Verdict.PASS)], profile="lossy")], tmp_path / "out",
                           engine="python")
    cell = lost_cell(summary)
    assert cell["verdict"] == "deviation" and cell["failure"] is False
    assert "drops what it was sent" in cell["anomalies"][0]["reason"]


def test_report_spark_engine_decides_the_same(tmp_path: Path, spark: Any) -> None:
    histories = [(case()[0], Verdict.PASS) for case in CASES]
    histories.append((History("stopped_early"), Verdict.FAIL))
    histories[-1][0].intent(Intent.DELIVERED)
    histories[-1][0].send(9)
    run = write_run(tmp_path / "run", histories)
    python = json.loads(build_report([run], tmp_path / "py", engine="python").json.read_text())
    with_spark = json.loads(build_report([run], tmp_path / "spark", engine="spark").json.read_text())
    assert python["anomalies"] == with_spark["anomalies"] and python["cells"] == with_spark["cells"]
    assert [c["verdict"] for c in python["cells"] if c["requirement"] == LOST] == ["fail"]
