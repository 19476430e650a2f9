"""The benchmark produces a well-formed table, bench.json and plot on a tiny run.
No timing is asserted: figures only have to be positive numbers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ackspec.bench.report import BenchResult, Cell, format_table
from ackspec.bench.scenarios import SCENARIOS
from ackspec.bench.targets import parse_targets
from ackspec.cli import main
from ackspec.errors import AckspecError

from .fake_broker import FakeBroker


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    fake = FakeBroker()
    yield fake
    fake.close()


def test_tiny_run_writes_table_json_and_plot(broker: FakeBroker, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    url = f"fake=stomp://127.0.0.1:{broker.port}"
    code = main(["bench", "--targets", url, "--messages", "16", "--repetitions", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].split() == ["scenario", "fake"]
    for scenario in SCENARIOS:
        row = next(line for line in lines if line.startswith(scenario.name + " "))
        assert float(row.split()[-1].replace(",", "")) > 0
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["format"] == "ackspec-bench/1" and data["targets"] == ["fake"]
    assert {r["scenario"] for r in data["results"]} == {s.name for s in SCENARIOS}
    assert all(len(r["runs"]) == 2 and r["error"] is None and r["median"] > 0 for r in data["results"])
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ratio_is_reference_over_faster_of_rabbitmq_and_activemq() -> None:
    result = BenchResult([("s", "t")], ["reference", "rabbitmq", "activemq", "artemis"], 1, 100)
    for target, rate in (("reference", 300.0), ("rabbitmq", 100.0), ("activemq", 200.0), ("artemis", 1000.0)):
        result.cells[("s", target)] = Cell("s", target, 10, [rate])
    assert result.ratio("s") == pytest.approx(1.5)
    table = format_table(result)
    assert table.splitlines()[0].split()[-1] == "ref/best(rmq,amq)"
    assert table.splitlines()[2].split()[-1] == "1.50"


def test_amqp_table_gives_the_issue_ratio_and_the_fastest_real_ratio() -> None:
    from ackspec.bench.amqp import AmqpBench  # noqa: PLC0415 (imports proton)

    result = AmqpBench(["reference", "rabbitmq", "artemis", "activemq6"], 10, 1, 100)
    rates = {"reference": 300.0, "rabbitmq": 100.0, "artemis": 600.0, "activemq6": 200.0}
    result.cells.update({("amqp-consume-credit", t): Cell("amqp-consume-credit", t, 10, [r]) for t, r in rates.items()})
    assert result.ratio("amqp-consume-credit", ("rabbitmq", "activemq6")) == (pytest.approx(1.5), "activemq6")
    assert result.ratio("amqp-consume-credit") == (pytest.approx(0.5), "artemis")
    row = next(line for line in result.table().splitlines() if line.startswith("amqp-consume-credit"))
    assert row.split()[-4:] == ["1.50", "(activemq6)", "0.50", "(artemis)"]
    assert result.ratio("amqp-presettled-send") is None  # nothing measured: no ratio, a "-"


def test_unreachable_target_is_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main(["bench", "--targets", f"x=stomp://127.0.0.1:{port}", "--messages", "2", "--repetitions", "1",
                 "--scenarios", "send-async", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "error: x / send-async: bench: target on port" in captured.out
    assert "cannot connect" in captured.out


@pytest.mark.parametrize("text", ["nope", "x=http://127.0.0.1:1", "x=stomp://10.0.0.1:61613", ""])
def test_bad_targets_are_one_line_errors(text: str) -> None:
    with pytest.raises(AckspecError):
        parse_targets(text)


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--messages", "zero"])
    assert exc.value.code == 2
    assert main(["bench", "--targets", "nope"]) == 2
    assert "unknown target 'nope'" in capsys.readouterr().err
