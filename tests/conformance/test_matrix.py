"""`ackspec matrix` renders one column per run, told apart by profile and protocol."""

from ackspec.cli.matrix_cmd import render
from ackspec.results import RunResults, TargetInfo, TestResult, Verdict


def _run(run_id: str, url: str, protocol: str, verdict: Verdict) -> RunResults:
    test = TestResult(requirement="STOMP-ACK-AUTO", test="t", verdict=verdict, level="MUST",
                      message="documented" if verdict is Verdict.DEVIATION else "")
    return RunResults(run_id=run_id, started="2026-11-22T10:00:00+00:00", finished="2026-11-22T10:00:09+00:00",
                      target=TargetInfo(url=url, profile="rabbitmq-3.10", protocol=protocol), tests=(test,), seed=0)


def test_one_broker_over_two_protocols_gets_two_columns() -> None:
    text = render([_run("a", "stomp://127.0.0.1:61614", "stomp", Verdict.PASS),
                   _run("b", "amqp://127.0.0.1:5672", "amqp", Verdict.DEVIATION)])
    header = next(line for line in text.splitlines() if line.startswith("| requirement"))
    assert "rabbitmq-3.10 (STOMP)" in header and "rabbitmq-3.10 (AMQP 1.0)" in header
    row = next(line for line in text.splitlines() if line.startswith("| STOMP-ACK-AUTO"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] != cells[3]  # pass on one column, deviation on the other
    assert "**rabbitmq-3.10 (AMQP 1.0)** `STOMP-ACK-AUTO` (deviation): documented" in text


def test_report_matrix_and_cli_name_a_target_alike() -> None:
    """One name per target everywhere: the report's column is the matrix's column, protocol included."""
    from ackspec.cli.run_cmd import target_label  # noqa: PLC0415
    from ackspec.pipeline.report import target_name  # noqa: PLC0415

    for url, protocol, name in (("reference://embedded", "stomp", "reference (STOMP)"),
                                ("reference+amqp://embedded", "amqp", "reference (AMQP 1.0)")):
        run = RunResults(run_id="r", started="s", finished="f", tests=(),
                         target=TargetInfo(url=url, profile="reference", protocol=protocol))
        assert target_name(run) == name
        assert f"| {name} |" in render([run])
        assert target_label(url, None) == name


def test_an_interrupted_run_says_so_in_the_matrix() -> None:
    run = RunResults(run_id="r", started="s", finished="f", tests=(), interrupted=True,
                     target=TargetInfo(url="reference://embedded", profile="reference", protocol="stomp"))
    row = next(line for line in render([run]).splitlines() if line.startswith("| reference (STOMP) |"))
    assert "r (interrupted: partial)" in row
