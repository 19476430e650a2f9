"""Client runs in the report and the matrix: a column per client library (library, version, protocol,
broker) after the broker targets, the client-side requirements with their per-client verdicts, and
sub-runs found inside a run directory."""

from __future__ import annotations

import json
from pathlib import Path

from ackspec.cli.matrix_cmd import render
from ackspec.pipeline.report import build_report
from ackspec.results import RunResults, TargetInfo, Verdict
from ackspec.results import TestResult as ResultEntry
from ackspec.results.layout import RunDir, resolve_run_dirs

CLIENT_RULE = "JMS-7.3.8-CALLBACK-ORDER"
BROKER_RULE = "STOMP-ACK-CLIENT-CUMULATIVE"
STOMP_PY = TargetInfo(url="client:stomp.py", profile="stomp.py-9.0", protocol="stomp", adapter="stomp.py",
                      kind="client", library="stomp.py", version="9.0.0", broker="reference")
QPID = TargetInfo(url="client:qpid-jms", profile="qpid-jms-2.10", protocol="amqp", adapter="shim:qpid",
                  kind="client", library="org.apache.qpid:qpid-jms-client", version="2.10.0", broker="artemis-2")
BROKER = TargetInfo(url="reference://embedded", profile="reference", protocol="stomp", adapter="reference")


def write(root: Path, run_id: str, target: TargetInfo, tests: list[tuple[str, Verdict]]) -> RunDir:
    run = RunDir(root)
    RunResults(run_id=run_id, started="2026-11-26T10:00:00+00:00", finished="2026-11-26T10:01:00+00:00",
               target=target, seed=0, tests=tuple(
                   ResultEntry(requirement=rid, test=f"t::{rid}", verdict=v, level="MUST") for rid, v in tests),
               ).write(run.results)
    return run


def test_client_runs_get_their_own_columns_after_the_brokers(tmp_path: Path) -> None:
    write(tmp_path / "broker", "b", BROKER, [(BROKER_RULE, Verdict.PASS)])
    write(tmp_path / "broker" / "client-reference", "c1", STOMP_PY, [(CLIENT_RULE, Verdict.NOT_APPLICABLE)])
    write(tmp_path / "qpid", "c2", QPID, [(CLIENT_RULE, Verdict.FAIL)])
    summary = build_report([str(tmp_path / "broker"), str(tmp_path / "qpid")], tmp_path / "out", engine="python")
    stomp_py, qpid = "client stomp.py 9.0.0 (stomp, reference)", "client org.apache.qpid:qpid-jms-client 2.10.0 " \
                                                                  "(amqp, artemis-2, via shim)"
    assert summary.targets == ("reference (STOMP)", qpid, stomp_py)
    data = json.loads(summary.json.read_text(encoding="utf-8"))
    cells = {(c["requirement"], c["target"]): c["verdict"] for c in data["cells"]}
    assert cells == {(BROKER_RULE, "reference (STOMP)"): "pass", (CLIENT_RULE, stomp_py): "not-applicable",
                     (CLIENT_RULE, qpid): "fail"}
    runs = {r["run"]: r for r in data["runs"]}
    assert (runs["c2"]["kind"], runs["c2"]["library"], runs["c2"]["version"], runs["c2"]["broker"]) == (
        "client", "org.apache.qpid:qpid-jms-client", "2.10.0", "artemis-2")
    never = data["coverage"]["never_run_against_target"]
    assert BROKER_RULE not in never[qpid]  # a broker rule is never expected of a client column
    assert CLIENT_RULE not in never["reference (STOMP)"]  # nor a client rule of a broker column
    html = summary.html.read_text(encoding="utf-8")
    assert f"<th>{stomp_py}</th>" in html and "qpid-jms-client 2.10.0" in html


def test_matrix_labels_client_columns_by_library_version_protocol_and_broker() -> None:
    broker = RunResults(run_id="b", started="2026-11-26T10:00:00+00:00", finished="2026-11-26T10:00:09+00:00",
                        target=BROKER, seed=0, tests=(ResultEntry(BROKER_RULE, "t", Verdict.PASS, "MUST"),))
    client = RunResults(run_id="c", started="2026-11-26T10:00:00+00:00", finished="2026-11-26T10:00:09+00:00",
                        target=STOMP_PY, seed=0, tests=(
                            ResultEntry("ARTEMIS-COMMIT-BLOCKS", "t", Verdict.DEVIATION, "MUST",
                                        message="documented deviation: commit does not wait"),))
    text = render([broker, client])
    header = next(line for line in text.splitlines() if line.startswith("| requirement"))
    assert "| reference (STOMP) | client stomp.py 9.0.0 (stomp, reference) |" in header
    assert "**client stomp.py 9.0.0 (stomp, reference)** `ARTEMIS-COMMIT-BLOCKS` (deviation)" in text


def test_naming_a_run_directory_names_its_sub_runs(tmp_path: Path) -> None:
    write(tmp_path / "run", "b", BROKER, [(BROKER_RULE, Verdict.PASS)])
    write(tmp_path / "run" / "client-reference", "c", STOMP_PY, [(CLIENT_RULE, Verdict.PASS)])
    (tmp_path / "run" / "report").mkdir()  # not a run: no results.json
    assert [d.root for d in resolve_run_dirs([str(tmp_path / "run")])] == [
        tmp_path / "run", tmp_path / "run" / "client-reference"]
    assert [d.root for d in resolve_run_dirs([str(tmp_path / "*")])] == [
        tmp_path / "run", tmp_path / "run" / "client-reference"]


def test_a_shim_driven_library_is_told_apart_from_the_same_library_in_process() -> None:
    in_process = TargetInfo(url="client:reference", adapter="reference", kind="client", library="ackspec reference "
                            "client", version="0.1.0", protocol="stomp", broker="reference")
    via_shim = TargetInfo(url="client:shim:python3 -m ackspec.adapters.shim", adapter="shim:reference", kind="client",
                          library="ackspec reference client", version="0.1.0", protocol="stomp", broker="reference")
    assert in_process.client_label() == "client ackspec reference client 0.1.0 (stomp, reference)"
    assert via_shim.client_label() == "client ackspec reference client 0.1.0 (stomp, reference, via shim)"


def test_matrix_command_puts_broker_columns_before_client_columns(tmp_path: Path) -> None:
    from ackspec.cli import main  # noqa: PLC0415

    write(tmp_path / "a-client", "c", STOMP_PY, [(CLIENT_RULE, Verdict.PASS)])
    write(tmp_path / "b-broker", "b", BROKER, [(BROKER_RULE, Verdict.PASS)])
    out = tmp_path / "matrix.md"
    assert main(["matrix", str(tmp_path / "*"), "--out", str(out)]) == 0
    header = next(line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| requirement"))
    assert header.index("reference (STOMP)") < header.index("client stomp.py")
