"""Run ``ackspec`` on a pseudo-terminal, as a user at a terminal would, and press Ctrl-C.

``pty.fork`` makes the child a session leader with the pseudo-terminal as its controlling
terminal, so writing ``^C`` to the master is a real Ctrl-C: the line discipline sends SIGINT
to the foreground process group, and ``isatty()`` is true in the child (the live display).
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class PtyRun:
    pid: int
    fd: int
    output: bytearray = field(default_factory=bytearray)
    status: int | None = None

    @classmethod
    def start(cls, *args: str, cwd: str, env: dict[str, str] | None = None) -> PtyRun:
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes ackspec
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "ackspec", *args],
                          {**os.environ, "COLUMNS": "160", "LINES": "40", "TERM": "xterm", **(env or {})})
            finally:
                os._exit(127)
        return cls(pid, fd)

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def read_until(self, done: Callable[[str], bool], timeout: float) -> bool:
        """Read the terminal until ``done(text)`` or the timeout; False on timeout or end of output."""
        deadline = time.monotonic() + timeout
        while not done(self.text):
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                return done(self.text)
        return True

    def interrupt(self) -> None:
        os.write(self.fd, b"\x03")

    def wait(self, timeout: float) -> int | None:
        """The exit code (a signal as 128 + n), reading the terminal meanwhile; None if still running."""
        if self.status is not None:
            return self.status if self.status >= 0 else 128 - self.status
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.2)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.1):
                    pass
                self.status = os.waitstatus_to_exitcode(status)
                return self.status if self.status >= 0 else 128 - self.status
        return None

    def kill(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # the child closed the terminal
            return False
        self.output += chunk
        return bool(chunk)
