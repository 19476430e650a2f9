"""Benchmark targets: the reference broker (started here as a subprocess) and the real brokers
(started by brokers/start.sh beforehand, found through the port table of :mod:`ackspec.brokers`).

A target is given by name (``reference``, ``rabbitmq``, ``activemq``, ``artemis``, ``activemq6``)
or as ``LABEL=stomp://127.0.0.1:PORT`` for any other loopback STOMP broker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ackspec.bench.client import Endpoint, LeanStompClient
from ackspec.brokers import BROKERS
from ackspec.errors import AckspecError

REFERENCE = "reference"


@dataclass(frozen=True)
class TargetSpec:
    label: str
    url: str | None
    """None for the reference broker, which is started on demand."""


def parse_targets(text: str) -> list[TargetSpec]:
    """``reference,rabbitmq,x=stomp://127.0.0.1:1234`` -> specs; one-line error on anything else."""
    specs: list[TargetSpec] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if "=" in item:
            label, url = item.split("=", 1)
            _endpoint_from_url(url)  # validates
            specs.append(TargetSpec(label, url))
        elif item == REFERENCE:
            specs.append(TargetSpec(REFERENCE, None))
        elif item in BROKERS:
            specs.append(TargetSpec(item, BROKERS[item].stomp_url))
        else:
            raise AckspecError(
                f"bench: unknown target {item!r} (use {REFERENCE}, {', '.join(BROKERS)} or LABEL=stomp://127.0.0.1:PORT)"
            )
    if not specs:
        raise AckspecError("bench: --targets is empty")
    if len({spec.label for spec in specs}) != len(specs):
        raise AckspecError("bench: a target is named twice in --targets")
    return specs


def _endpoint_from_url(url: str, label: str = "") -> Endpoint:
    parts = urlsplit(url)
    if parts.scheme != "stomp" or not parts.hostname or not parts.port:
        raise AckspecError(f"bench: target URL {url!r} must look like stomp://127.0.0.1:PORT")
    info = BROKERS.get(label)
    login = parts.username or (info.login if info else "admin")
    passcode = parts.password or (info.passcode if info else "admin")
    vhost = info.vhost if info else parts.hostname
    return Endpoint(parts.hostname, parts.port, login, passcode, vhost)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now (the OS's pick), for a broker this run starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(endpoint: Endpoint, process: subprocess.Popen[bytes] | None, deadline_s: float) -> None:
    """Returns once ``endpoint`` answers a STOMP CONNECT; one line if ``process`` exits or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    last = ""
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AckspecError(f"bench: the reference broker exited with code {process.returncode} at start-up")
        try:
            LeanStompClient(endpoint, timeout=2.0).close()
            return
        except AckspecError as exc:
            last = str(exc)
        except OSError as exc:  # e.g. reset while the broker starts: retry until the deadline
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise AckspecError(f"bench: target on port {endpoint.port} not ready after {deadline_s:.0f} s ({last})")


def stop_child(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not exited within ``grace_s``: a benchmark leaves no broker behind."""
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def reference_available() -> bool:
    return importlib.util.find_spec("ackspec.cli.broker_cmd") is not None


@contextlib.contextmanager
def running_target(spec: TargetSpec) -> Iterator[Endpoint]:
    """Yields a ready endpoint; starts (and afterwards stops) the reference broker if asked for it."""
    if spec.url is not None:
        endpoint = _endpoint_from_url(spec.url, spec.label)
        wait_ready(endpoint, None, 3.0)
        yield endpoint
        return
    if not reference_available():
        raise AckspecError("bench: 'ackspec broker' is not available in this installation")
    port = free_port()
    with broker_process("ackspec-bench-ref-", "--stomp", f"127.0.0.1:{port}") as (process, log_path):
        endpoint = Endpoint("127.0.0.1", port, "admin", "admin", "127.0.0.1")
        try:
            wait_ready(endpoint, process, 30.0)
        except AckspecError as exc:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise AckspecError(f"{exc}; log: {' | '.join(tail)}") from exc
        yield endpoint


@contextlib.contextmanager
def broker_process(prefix: str, *listeners: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``ackspec broker`` with ``listeners`` (``--stomp 127.0.0.1:PORT``, ``--amqp ...``) in a subprocess, its
    journal in a temporary directory named ``prefix...``; yields the process and its log file. On exit the
    broker is terminated (killed if it has not gone after 10 s) and the directory removed."""
    with tempfile.TemporaryDirectory(prefix=prefix) as data:
        log_path = Path(data) / "broker.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", *listeners,
                                        "--data", str(Path(data) / "d")],
                                       stdout=log, stderr=subprocess.STDOUT)
            try:
                yield process, log_path
            finally:
                stop_child(process)
