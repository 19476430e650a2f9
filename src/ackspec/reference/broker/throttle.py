"""Backoff after failed logins (sans-IO: the caller passes the time).

Without it, 3,000 wrong passwords went through in under 5 s (issue 20). After ``free`` failures for a
login, the next attempt is refused without looking at the passcode until ``base * 2**(failures - free)``
seconds (at most ``cap``) have passed since the last failure; a success clears the count. The refusal
reads like any other authentication failure plus "retry later", so it tells nothing about the passcode.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoginThrottle:
    free: int = 3
    base: float = 0.5
    cap: float = 30.0
    max_tracked: int = 100_000
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)

    def wait(self, login: str, now: float) -> float:
        """Seconds ``login`` must still wait before its passcode is checked again (0: check it)."""
        count, last = self._failures.get(login, (0, 0.0))
        if count < self.free:
            return 0.0
        delay = min(self.cap, self.base * float(2 ** (count - self.free)))
        return max(0.0, last + delay - now)

    def failed(self, login: str, now: float) -> None:
        if len(self._failures) >= self.max_tracked and login not in self._failures:
            self._failures.clear()  # bounded memory: forgetting grants at most ``free`` more tries each
        count, _ = self._failures.get(login, (0, 0.0))
        self._failures[login] = (count + 1, now)

    def succeeded(self, login: str) -> None:
        self._failures.pop(login, None)
