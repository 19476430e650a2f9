"""The port table of ackspec.brokers must match brokers/common.sh, which the scripts use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ackspec import brokers
from ackspec.cli import main
from ackspec.errors import AckspecError

COMMON_SH = Path(__file__).resolve().parents[2] / "brokers" / "common.sh"


def _shell_ports() -> dict[str, int]:
    text = COMMON_SH.read_text(encoding="utf-8")
    return {key: int(value) for key, value in re.findall(r"^([A-Z0-9_]+_PORT)=(\d+)$", text, re.MULTILINE)}


def test_python_table_matches_common_sh() -> None:
    ports = _shell_ports()
    for info in brokers.BROKERS.values():
        prefix = info.name.upper()
        assert ports[f"{prefix}_STOMP_PORT"] == info.stomp_port
        if info.amqp_port is not None:
            assert ports[f"{prefix}_AMQP_PORT"] == info.amqp_port
        else:
            assert f"{prefix}_AMQP_PORT" not in ports
        if info.ws_port is not None and info.ws_port != info.stomp_port:  # Artemis: one acceptor for both
            assert ports[f"{prefix}_WS_PORT"] == info.ws_port
        else:
            assert f"{prefix}_WS_PORT" not in ports


def test_all_ports_distinct_so_all_brokers_run_at_once() -> None:
    ports = [info.stomp_port for info in brokers.BROKERS.values()]
    ports += [info.amqp_port for info in brokers.BROKERS.values() if info.amqp_port is not None]
    ports += [port for info in brokers.BROKERS.values() for _, port in info.other_ports]
    ports += [info.ws_port for info in brokers.BROKERS.values() if info.ws_port not in (None, info.stomp_port)]
    assert len(ports) == len(set(ports))
    assert set(_shell_ports().values()) == set(ports)


def test_unknown_broker_is_one_line_error() -> None:
    with pytest.raises(AckspecError, match="unknown broker 'nope'"):
        brokers.broker("nope")


def test_cli_ports_and_bad_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["brokers", "ports", "artemis"]) == 0
    out = capsys.readouterr().out
    assert "stomp://127.0.0.1:61617" in out and "amqp://127.0.0.1:5673" in out
    assert main(["brokers", "status", "nope"]) == 2
    assert "unknown broker 'nope'" in capsys.readouterr().err


def test_scripts_found_from_checkout() -> None:
    assert (brokers.scripts_dir() / "install.sh").is_file()
