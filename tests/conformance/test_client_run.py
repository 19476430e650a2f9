"""`ackspec run --client NAME` judges a client library into a run directory like a broker run's, and a plain
`ackspec run` also judges the reference client; client profiles work like broker profiles (deviation, stale)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ackspec.conformance.client_target import ClientTarget, client_deviations
from ackspec.spec.client_profiles import load_client_profile

COMMIT = "ARTEMIS-COMMIT-BLOCKS"
COMMIT_TEST = "*test_transacted_sends_do_not_block_but_commit_does"


def ackspec(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ackspec", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def results(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    return data


def verdicts(run_dir: Path) -> dict[str, str]:
    return {t["requirement"]: t["verdict"] for t in results(run_dir)["tests"]}


def passes_where_it_applies(run_dir: Path, requirement: str) -> bool:
    """The client passed ``requirement`` and every other test of the run, except the JMSContext cases, which
    are not applicable to a client without the simplified API (the reference client, the Python shim)."""
    tests = results(run_dir)["tests"]
    return (any(t["verdict"] == "pass" and t["requirement"] == requirement for t in tests)
            and all(t["verdict"] == "pass" or (t["verdict"] == "not-applicable" and t["test"].endswith("[context]")
                                               and "lacks context" in (t["message"] or "")) for t in tests))


def client_profile(tmp_path: Path, client: str, deviation: str) -> Path:
    path = tmp_path / "probe-1.0.yaml"
    path.write_text(f"""\
name: probe-1.0
title: a profile written by a test
description: one deviation, to see how the run treats it
client: {client}
library: probe
version: "1.0"
protocol: stomp
brokers: [reference, artemis-2]
deviations:
  - {deviation}
""", encoding="utf-8")
    return path


@pytest.mark.parametrize(("client", "message"), [
    ("no-such-client", "unknown client 'no-such-client'; known: "),
    ("shim:no-such-program --flag", "shim command not found: 'no-such-program'"),
    ("no_such_module:Client", "cannot load client 'no_such_module:Client'"),
])
def test_a_bad_client_is_one_line_and_exit_2(tmp_path: Path, client: str, message: str) -> None:
    done = ackspec("run", "--client", client, "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_client_and_target_do_not_mix(tmp_path: Path) -> None:
    done = ackspec("run", "--client", "stomp.py", "--target", "stomp://127.0.0.1:61613")
    assert done.returncode == 2 and "--target is for broker runs" in done.stderr


def test_client_run_writes_a_run_directory_judged_with_the_client_profile(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = ackspec("run", "--client", "stomp.py", "--only", COMMIT, "--only", "JMS-7.2-SYNC-SEND-CONFIRMED",
                   "--out", str(run))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    target = results(run)["target"]
    assert target["kind"] == "client" and target["library"] == "stomp.py" and target["profile"] == "stomp.py-9.0"
    assert target["broker"] == "reference" and target["protocol"] == "stomp" and target["version"]
    assert verdicts(run) == {COMMIT: "deviation", "ARTEMIS-TRANSACTED-SENDS-DO-NOT-BLOCK": "pass",
                             "JMS-7.2-SYNC-SEND-CONFIRMED": "pass"}
    assert (run / "junit.xml").is_file() and any((run / "allure-results").iterdir())
    # the evidence: stomp.py wrote COMMIT without asking for a receipt, so nothing could hold its answer
    entry = next(t for t in results(run)["tests"] if t["requirement"] == COMMIT)
    assert entry["history"].startswith("client-logs/")
    wire = [json.loads(line) for line in (run / entry["history"]).read_text(encoding="utf-8").splitlines()]
    commits = [w for w in wire if w.get("command") == "COMMIT"]
    assert commits and all("receipt" not in w["headers"] for w in commits)
    assert not any("released" in w for w in wire)
    report = json.loads((run / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["targets"] == [f"client stomp.py {target['version']} (stomp, reference)"]
    assert "client-side suite: stomp.py" in done.stdout and "client profile stomp.py-9.0" in done.stdout


def test_a_client_deviation_that_stops_happening_is_stale_and_fails_the_run(tmp_path: Path) -> None:
    profile = client_profile(tmp_path, "reference", "{requirement: JMS-7.2-SYNC-SEND-CONFIRMED, reason: said to "
                             "return early, observed: made up for this test, test: '*test_sync_send_returns_only*'}")
    run = tmp_path / "run"
    done = ackspec("run", "--client", "reference", "--profile", str(profile), "--only", "JMS-7.2-SYNC-SEND-CONFIRMED",
                   "--out", str(run))
    assert done.returncode == 1
    assert verdicts(run) == {"JMS-7.2-SYNC-SEND-CONFIRMED": "stale"}


def test_a_client_deviation_excuses_only_the_test_it_names(tmp_path: Path) -> None:
    profile = client_profile(tmp_path, "stomp.py", f"{{requirement: {COMMIT}, reason: commit does not wait, "
                             "observed: in another test, test: '*test_some_other_test'}")
    run = tmp_path / "run"
    done = ackspec("run", "--client", "stomp.py", "--profile", str(profile), "--only", COMMIT, "--out", str(run))
    assert done.returncode == 1
    assert verdicts(run)[COMMIT] == "fail"


def test_a_client_deviation_limited_to_another_broker_does_not_apply(tmp_path: Path) -> None:
    profile = load_client_profile(client_profile(
        tmp_path, "stomp.py", f"{{requirement: {COMMIT}, reason: only there, observed: on Artemis, "
                              f"test: '{COMMIT_TEST}', brokers: [artemis-2]}}"))
    target = ClientTarget("stomp.py", profile)
    assert target.broker == "reference" and target.deviations_for(COMMIT_TEST.strip("*")) == {}
    assert client_deviations("stomp.py-9.0", "reference") == [
        d.requirement for d in load_client_profile("stomp.py-9.0").deviations]


def test_a_shim_names_its_library(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = ackspec("run", "--client", f"shim:{sys.executable} -m ackspec.adapters.shim", "--only",
                   "JMS-7.3.8-CALLBACK-ORDER", "--out", str(run), "--no-report")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    target = results(run)["target"]
    assert target["library"] == "ackspec reference client" and target["profile"] is None
    assert passes_where_it_applies(run, "JMS-7.3.8-CALLBACK-ORDER"), results(run)["tests"]


def test_a_plain_run_also_judges_the_reference_client(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = ackspec("run", "--only", "STOMP-CONTENT-LENGTH", "--out", str(run))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    client = run / "client-reference"
    assert results(run / "reference-stomp")["target"]["kind"] == "broker"
    assert results(client)["target"]["kind"] == "client" and verdicts(client)["STOMP-CONTENT-LENGTH"] == "pass"
    report = json.loads((run / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["targets"][:2] == ["reference (AMQP 1.0)", "reference (STOMP)"]
    assert report["targets"][2].startswith("client ackspec reference client")
    assert {(c["target"], c["verdict"]) for c in report["cells"] if c["requirement"] == "STOMP-CONTENT-LENGTH"} == {
        ("reference (STOMP)", "pass"), ("reference (AMQP 1.0)", "pass"), (report["targets"][2], "pass")}


def test_a_plain_run_of_client_side_rules_alone_is_the_reference_clients_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = ackspec("run", "--only", "JMS-7.3.8-CALLBACK-ORDER", "--out", str(run), "--no-report")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    client = run / "client-reference"  # the broker targets had no test to run: no run directory of theirs
    assert sorted(p.name for p in run.iterdir()) == ["client-reference"]
    assert results(client)["target"]["kind"] == "client"
    assert passes_where_it_applies(client, "JMS-7.3.8-CALLBACK-ORDER"), results(client)["tests"]


def test_a_plain_dry_run_lists_the_client_side_tests_too(tmp_path: Path) -> None:
    done = ackspec("run", "--dry-run", "--only", "JMS-7.3.8-CALLBACK-ORDER", "--only", "STOMP-CONTENT-LENGTH",
                   "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    listed = [word for line in done.stdout.splitlines() for word in line.split() if "::" in word]
    assert any("conformance/client/" in n for n in listed)
    assert any("conformance/suite/" in n for n in listed)


def test_client_evidence_keeps_no_credentials() -> None:
    from ackspec.conformance.client_evidence import _redacted  # noqa: PLC0415

    entry = {"command": "CONNECT", "headers": {"login": "admin", "passcode": "admin", "host": "/"}}
    assert _redacted(entry)["headers"] == {"login": "admin", "passcode": "***", "host": "/"}
    assert entry["headers"]["passcode"] == "admin"  # the proxy's own record is left alone


@pytest.mark.parametrize(("argv", "message"), [
    (["--broker", "artemis"], "--broker names the broker a client runs against: use it with --client"),
    (["--client", "stomp.py", "--broker", "nope"], "unknown broker 'nope' (known: rabbitmq, activemq, artemis"),
])
def test_broker_for_a_client_run_is_checked_first(tmp_path: Path, argv: list[str], message: str) -> None:
    done = ackspec("run", *argv, "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_client_run_never_credits_another_broker_than_asked() -> None:
    from ackspec.conformance.client_target import ClientBrokerMismatch, resolve_client  # noqa: PLC0415

    target = resolve_client("reference", None, "artemis")
    assert target.expected_broker == "artemis-2"
    with pytest.raises(ClientBrokerMismatch, match="against reference, not artemis-2"):
        target.note(object(), "reference")
    target.note(object(), "artemis-2")
    assert target.info().broker == "artemis-2"
    assert resolve_client("reference", None).expected_broker is None


def test_a_shim_that_never_says_hello_is_an_error_of_the_run_not_a_verdict(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = ackspec("run", "--client", "shim:false", "--only", "JMS-7.3.8-CALLBACK-ORDER", "--out", str(run),
                   "--no-report")
    assert done.returncode == 2
    assert "exited before its hello" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert set(verdicts(run).values()) == {"error"}
