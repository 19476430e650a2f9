"""``--restart-command``: restarting a real target from the harness (no broker needed: a listening socket
stands in for the target, shell commands for the restart)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ackspec.adapters.base import AdapterError, Capability
from ackspec.conformance.restart import RestartCommand
from ackspec.conformance.target import resolve


@pytest.fixture
def listening() -> Iterator[str]:
    """A stomp:// URL where something accepts TCP connections."""
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield f"stomp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_done_once_the_command_succeeded_and_the_target_listens(listening: str) -> None:
    RestartCommand("true", listening)()


def test_a_failing_command_is_one_readable_error(listening: str) -> None:
    with pytest.raises(AdapterError, match=r"failed \(exit 3\): broker would not stop"):
        RestartCommand("echo 'broker would not stop' >&2; exit 3", listening)()


def test_a_command_that_hangs_is_stopped_at_its_timeout(listening: str) -> None:
    with pytest.raises(AdapterError, match=r"did not finish within 0\.5s"):
        RestartCommand("sleep 5", listening, timeout=0.5)()


def test_a_target_that_does_not_come_back_is_an_error() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"stomp://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    with pytest.raises(AdapterError, match="did not come back"):
        RestartCommand("true", url, timeout=0.5)()


def test_a_restart_command_gives_a_real_target_the_restart_capability(listening: str) -> None:
    plain = resolve(listening, "artemis-2")
    assert Capability.BROKER_RESTART not in plain.settings.capabilities and plain.restart is None
    target = resolve(listening, "artemis-2", restart_command="bash brokers/restart.sh artemis")
    assert Capability.BROKER_RESTART in target.settings.capabilities
    assert target.restart == RestartCommand("bash brokers/restart.sh artemis", listening)
