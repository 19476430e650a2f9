"""``ackspec spec`` sub-commands, run in-process: output, exit codes, and one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ackspec.cli import main
from ackspec.spec import load_catalogue

from .specfiles import family_yaml

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ackspec: ")
    return lines[0]


def test_list_all(run: Run) -> None:
    code, out, err = run("spec", "list")
    assert code == 0
    assert len(out.splitlines()) == len(load_catalogue())
    assert f"{len(load_catalogue())} of {len(load_catalogue())} requirements" in err


def test_list_filters(run: Run) -> None:
    code, out, _ = run("spec", "list", "--family", "jms-send-async", "--level", "must-not", "--role", "client",
                       "--protocol", "stomp")
    assert code == 0
    rows = out.splitlines()
    assert rows and all(row.startswith("JMS-7.3") and "MUST-NOT" in row for row in rows)
    assert any(row.startswith("JMS-7.3.8-NOT-ON-SENDING-THREAD") for row in rows)


def test_list_json(run: Run) -> None:
    code, out, _ = run("spec", "list", "--family", "activemq-ack", "--json")
    assert code == 0
    data = json.loads(out)
    by_id = {r["id"]: r for r in data}
    assert by_id["AMQ-OPTIMIZE-ACK-BATCH-FACTOR"]["parameters"]["batch_factor"]["default"] == 0.65
    assert all(r["family"] == "activemq-ack" for r in data)


def test_show(run: Run) -> None:
    code, out, _ = run("spec", "show", "ARTEMIS-BLOCK-ON-DURABLE-SEND")
    assert code == 0
    assert out.startswith("ARTEMIS-BLOCK-ON-DURABLE-SEND: ")
    assert "parameter:  blockOnDurableSend (boolean) default=True" in out
    assert "seed 000_93c1ab1d35904afa.txt" in out


def test_show_json(run: Run) -> None:
    code, out, _ = run("spec", "show", "JMS-7.3.8-CALLBACK-ORDER", "--json")
    assert code == 0 and json.loads(out)["tck"] == "JMS:SPEC:275.7"


def test_show_unknown_id_is_one_line_exit_2(run: Run) -> None:
    code, out, err = run("spec", "show", "JMS-7.3.8-CALLBACK-ORDR")
    assert code == 2 and out == ""
    assert one_line(err) == ("ackspec: unknown requirement ID 'JMS-7.3.8-CALLBACK-ORDR' "
                             "(not in the catalogue; did you mean JMS-7.3.8-CALLBACK-ORDER?)")


def test_list_unknown_family_is_one_line_exit_2(run: Run) -> None:
    code, _, err = run("spec", "list", "--family", "jms-nothing")
    assert code == 2 and "unknown family 'jms-nothing' (known: activemq-ack" in one_line(err)


def test_bad_level_argument_is_one_line_exit_2(run: Run) -> None:
    with pytest.raises(SystemExit) as info:
        main(["spec", "list", "--level", "OFTEN"])
    assert info.value.code == 2


def test_validate_bundled(run: Run) -> None:
    code, out, _ = run("spec", "validate")
    assert code == 0
    assert out.startswith(f"ok: {len(load_catalogue())} requirements in ")


def test_validate_root_ok(run: Run, make_catalogue: Callable[..., Path], tmp_path: Path) -> None:
    targets = tmp_path / "targets"
    targets.mkdir()
    code, out, _ = run("spec", "validate", "--root", str(make_catalogue()), "--targets", str(targets))
    assert code == 0 and out.startswith("ok: 1 requirements in 1 families; 0 target profiles")


@pytest.mark.parametrize(("files", "expected"), [
    ({"stomp-test.yaml": family_yaml("stomp-test", "STOMP-A") + "  - id: [\n"}, "bad YAML"),
    ({"stomp-test.yaml": family_yaml("stomp-test", "STOMP-A").replace("role: broker", "role: nobody")},
     "requirements[0] (STOMP-A).role: 'nobody' is not one of"),
    ({"stomp-a.yaml": family_yaml("stomp-a", "STOMP-A"), "stomp-b.yaml": family_yaml("stomp-b", "STOMP-A")},
     "duplicate requirement ID STOMP-A, already defined at"),
    ({"stomp-test.yaml": family_yaml("stomp-wrong", "STOMP-A")}, "family.id: unknown family 'stomp-wrong'"),
], ids=["bad-yaml", "schema", "duplicate-id", "unknown-family"])
def test_validate_bad_input_is_one_line_exit_2(run: Run, make_catalogue: Callable[..., Path],
                                               files: dict[str, str], expected: str) -> None:
    code, out, err = run("spec", "validate", "--root", str(make_catalogue(files)))
    assert code == 2 and out == ""
    line = one_line(err)
    assert expected in line and ".yaml:" in line


def test_validate_missing_root(run: Run, tmp_path: Path) -> None:
    code, _, err = run("spec", "validate", "--root", str(tmp_path / "nowhere"))
    assert code == 2 and "catalogue directory not found" in one_line(err)


def test_coverage(run: Run, tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\nfrom ackspec.conformance.markers import requirement\n\n"
        "@requirement('JMS-6.2.7-COMMIT-ATOMIC', 'NOT-AN-ID')\ndef test_a(): ...\n\n"
        "pytestmark = pytest.mark.requirement(['JMS-6.2.7-ROLLBACK-DISCARDS-SENDS'])\n", encoding="utf-8")
    code, out, _ = run("spec", "coverage", "--scan", str(tmp_path), "--json")
    assert code == 1  # testable MUSTs are uncovered by this one file
    report = json.loads(out)
    assert "JMS-6.2.7-ROLLBACK-REDELIVERS" in report["gate"]
    assert set(report["covered"]) == {"JMS-6.2.7-COMMIT-ATOMIC", "JMS-6.2.7-ROLLBACK-DISCARDS-SENDS"}
    assert "JMS-6.2.7-ROLLBACK-REDELIVERS" in report["uncovered"]
    assert "JMS-6.2.7-JTA-LOCAL-COMMIT-FORBIDDEN" in report["untestable"]
    assert list(report["unknown_citations"]) == ["NOT-AN-ID"]
    code, out, _ = run("spec", "coverage", "--scan", str(tmp_path), "--strict", "--level", "SHOULD")
    assert code == 1
    assert out.startswith("SHOULD: 0 of ") and "unknown ID cited: NOT-AN-ID" in out


def test_coverage_default_scan_is_the_installed_suite_only(run: Run, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's own tests/ (the current directory) are never counted; the project's only on request."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text(
        "from ackspec.conformance.markers import requirement\n\n"
        "@requirement('SOLACE-ACK-MEANS-PERSISTED')\ndef test_a(): ...\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    _, out, _ = run("spec", "coverage", "--json")
    report = json.loads(out)
    assert [Path(p).name for p in report["scanned"]] == ["conformance"]
    assert not [where for places in report["covered"].values() for where in places if str(tmp_path) in where]
    _, out, _ = run("spec", "coverage", "--json", "--include-project-tests")
    assert [Path(p).name for p in json.loads(out)["scanned"]] == ["conformance", "tests"]
    assert str(tmp_path) not in out


def test_coverage_pending_requirements_are_reported_not_failed(run: Run, tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_a(): ...\n", encoding="utf-8")
    _, out, _ = run("spec", "coverage", "--scan", str(tmp_path), "--json")
    gate = json.loads(out)["gate"]
    code, out, _ = run("spec", "coverage", "--scan", str(tmp_path), *(f"--pending={rid}" for rid in gate))
    assert code == 0 and "(pending)" in out
    code, out, _ = run("spec", "coverage", "--scan", str(tmp_path), *(f"--pending={rid}" for rid in gate),
                       "--pending", "STOMP-NOT-A-REQUIREMENT*")
    assert code == 1 and "pending STOMP-NOT-A-REQUIREMENT* matches no uncovered testable MUST" in out


def test_coverage_lists_property_requirements_no_hypothesis_test_cites(run: Run, tmp_path: Path) -> None:
    """A property/stateful requirement cited only by an example test is 'technique not honoured'."""
    (tmp_path / "test_x.py").write_text(
        "from hypothesis import given, strategies as st\n"
        "from ackspec.conformance.markers import requirement\n\n"
        "@requirement('JMS-6.2.10-CLIENT-ACK-CUMULATIVE')\ndef test_example(): ...\n\n"
        "@requirement('JMS-3.5.11-DELIVERY-COUNT-INCREMENTS')\ndef test_property(harness):\n"
        "    @given(n=st.integers())\n    def inner(n): ...\n    inner()\n", encoding="utf-8")
    _, out, _ = run("spec", "coverage", "--scan", str(tmp_path), "--json")
    unhonoured = json.loads(out)["technique_not_honoured"]
    assert "JMS-6.2.10-CLIENT-ACK-CUMULATIVE" in unhonoured
    assert "JMS-3.5.11-DELIVERY-COUNT-INCREMENTS" not in unhonoured
    assert "AMQ-ACKMODE-VALUES" not in unhonoured  # technique: example: never listed
    _, out, _ = run("spec", "coverage", "--scan", str(tmp_path))
    assert "technique not honoured" in out and "JMS-6.2.10-CLIENT-ACK-CUMULATIVE" in out


def test_coverage_missing_scan_path(run: Run, tmp_path: Path) -> None:
    code, _, err = run("spec", "coverage", "--scan", str(tmp_path / "nowhere"))
    assert code == 2 and "--scan path not found" in one_line(err)


def test_docs_write_check_and_stdout(run: Run, tmp_path: Path) -> None:
    out_file = tmp_path / "docs" / "catalogue.md"
    code, out, _ = run("spec", "docs", "--out", str(out_file))
    assert code == 0 and out.startswith("wrote ")
    assert run("spec", "docs", "--out", str(out_file), "--check")[0] == 0
    out_file.write_text(out_file.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    code, _, err = run("spec", "docs", "--out", str(out_file), "--check")
    assert code == 1 and "is out of date" in one_line(err)
    code, out, _ = run("spec", "docs", "--out", "-")
    assert code == 0 and out.startswith("# ackspec requirement catalogue")


def test_spec_without_subcommand_prints_usage(run: Run) -> None:
    code, _, err = run("spec")
    assert code == 2 and "SUBCOMMAND" in err
