"""Restarting a real target between the steps of a test: ``ackspec run --restart-command CMD``.

The embedded reference broker restarts in-process (``EmbeddedBrokerControls.restart_broker``). A real
broker is restarted by a command its operator gives, e.g. ``bash brokers/restart.sh artemis`` for the
brokers this project starts: a clean shutdown, then a start that keeps the stored messages. With it the
target gains the ``broker-restart`` capability, so the restart tests (persistent messages survive,
redeliveries after a restart are marked) run against it as they run against the reference broker.

Only a clean restart: a power loss (unsynced writes lost) cannot be caused from outside a broker, so
tests that need one stay not-applicable.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from ackspec.adapters.base import AdapterError
from ackspec.conformance.verdicts import TargetUnavailable

DEFAULT_RESTART_TIMEOUT = 180.0
"""Seconds a restart command may take (a JVM broker stops and starts in 5-20 s on this machine)."""


@dataclass(frozen=True)
class RestartCommand:
    """Runs ``command`` in a shell; the restart is done when it exits 0 and ``url`` accepts TCP
    connections again (the command may return before every listener is open)."""

    command: str
    url: str
    timeout: float = DEFAULT_RESTART_TIMEOUT

    def __call__(self) -> None:
        started = time.monotonic()
        try:
            done = subprocess.run(self.command, shell=True, capture_output=True, text=True,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise AdapterError(f"restart command {self.command!r} did not finish within {self.timeout:g}s") from exc
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise AdapterError(f"restart command {self.command!r} failed (exit {done.returncode}): {last[0]}")
        self._await_listening(started + self.timeout)

    def _await_listening(self, deadline: float) -> None:
        from ackspec.conformance.target import probe  # noqa: PLC0415 - target imports this module

        while True:
            try:
                probe(self.url, timeout=1.0)
                return
            except TargetUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise AdapterError(f"the target did not come back after {self.command!r}: {exc}") from exc
            time.sleep(0.2)  # polling a listening socket: there is no event to wait on from outside
