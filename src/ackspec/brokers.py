"""Real brokers on loopback: the port table and thin wrappers around the ``brokers/*.sh`` scripts.

The scripts (in the repository's ``brokers/`` folder) do the work: install from Debian and Maven
Central, start with all state under ``.brokers/run/NAME``, wait until STOMP answers CONNECTED, stop
cleanly. This module only knows where they are and which ports each broker listens on, so tox
environments, ``ackspec brokers`` and ``ackspec bench`` agree on one table.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ackspec.errors import AckspecError


@dataclass(frozen=True)
class BrokerInfo:
    """One real broker: its name for the scripts, what it is, and its loopback ports."""

    name: str
    product: str
    stomp_port: int
    amqp_port: int | None
    other_ports: tuple[tuple[str, int], ...]
    login: str
    passcode: str
    vhost: str
    profile: str
    ws_port: int | None = None  # STOMP over WebSocket; Artemis's STOMP acceptor takes it on its STOMP port
    ws_path: str = "/"

    @property
    def stomp_url(self) -> str:
        return f"stomp://127.0.0.1:{self.stomp_port}"

    @property
    def ws_url(self) -> str | None:
        return None if self.ws_port is None else f"ws://127.0.0.1:{self.ws_port}{self.ws_path}"

    @property
    def amqp_url(self) -> str | None:
        return None if self.amqp_port is None else f"amqp://127.0.0.1:{self.amqp_port}"


BROKERS: dict[str, BrokerInfo] = {
    info.name: info
    for info in (
        BrokerInfo("rabbitmq", "RabbitMQ 3.10 (Debian)", 61614, 5672,
                   (("erlang-dist", 25672), ("epmd", 4369)), "guest", "guest", "/", "rabbitmq-3.10", 15674, "/ws"),
        BrokerInfo("activemq", "ActiveMQ Classic 5.17 (Debian)", 61613, None,
                   (("openwire", 61616),), "admin", "admin", "127.0.0.1", "activemq-5.17"),
        BrokerInfo("artemis", "ActiveMQ Artemis 2.x (Maven Central)", 61617, 5673,
                   (("core", 61620),), "admin", "admin", "127.0.0.1", "artemis-2", 61617),
        BrokerInfo("activemq6", "ActiveMQ Classic 6.x (Maven Central)", 61618, 5674,
                   (("openwire", 61619),), "admin", "admin", "127.0.0.1", "activemq-6", 61621,
                   "/?frames=text"),  # its WebSocket listener ignores binary messages
    )
}
"""Port table; brokers/common.sh holds the same numbers (tests/brokers checks they agree)."""


def broker(name: str) -> BrokerInfo:
    """The broker called ``name``, or a one-line error naming the known ones."""
    try:
        return BROKERS[name]
    except KeyError:
        raise AckspecError(f"unknown broker {name!r} (known: {', '.join(BROKERS)})") from None


def scripts_dir() -> Path:
    """The repository's ``brokers/`` folder (overridable with ``ACKSPEC_BROKERS_DIR``).

    The scripts live in the source checkout, not in the installed package, so an installed
    ackspec finds them through the environment variable or the current directory.
    """
    candidates: list[Path] = []
    if env := os.environ.get("ACKSPEC_BROKERS_DIR"):
        candidates.append(Path(env))
    candidates.append(Path(__file__).resolve().parents[2] / "brokers")
    candidates.append(Path.cwd() / "brokers")
    for candidate in candidates:
        if (candidate / "start.sh").is_file():
            return candidate
    raise AckspecError(
        "brokers/ scripts not found: run from the ackspec source checkout or set ACKSPEC_BROKERS_DIR"
    )


def _run_script(script: str, *args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    path = scripts_dir() / script
    return subprocess.run(["bash", str(path), *args], check=False, text=True, capture_output=capture)


def _names(names: list[str] | tuple[str, ...]) -> list[str]:
    for name in names:
        broker(name)
    return list(names)


def install(*names: str) -> None:
    """Installs the named brokers (all when none is named); raises AckspecError on failure."""
    if _run_script("install.sh", *_names(names)).returncode != 0:
        raise AckspecError(f"installing {' '.join(names) or 'the brokers'} failed (see the lines above)")


def start(name: str, *, fresh: bool = False) -> BrokerInfo:
    """Starts one broker and returns its entry once STOMP answers CONNECTED."""
    info = broker(name)
    args = [name, "--fresh"] if fresh else [name]
    if _run_script("start.sh", *args).returncode != 0:
        raise AckspecError(f"broker {name} did not start (see the lines above)")
    return info


def stop(*names: str) -> None:
    """Stops the named brokers (not running is fine)."""
    if _run_script("stop.sh", *_names(names or tuple(BROKERS))).returncode != 0:
        raise AckspecError(f"stopping {' '.join(names)} failed (see the lines above)")


def status(*names: str) -> str:
    """The status table that brokers/status.sh prints."""
    result = _run_script("status.sh", *_names(names), capture=True)
    if result.returncode != 0:
        raise AckspecError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "status failed")
    return result.stdout
