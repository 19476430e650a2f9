"""What a client-side test saw, kept as its evidence: the client's events and the frames it wrote.

A broker test leaves an operation history (``histories/``); a client-side test leaves its client
log (``client-logs/<test>.jsonl``, :meth:`ackspec.results.layout.RunDir.client_log_path`), which
``results.json`` names as the test's ``history``. One JSON object per line:

* ``{"source": "client", "client": 0, "index": 3, "at": 0.0123, "kind": "completion", "detail": {...}}``:
  each event the client under test reported (completion and exception callbacks with their threads,
  acknowledgements with their ActiveMQ types, window events, listener deliveries), ``at`` in seconds
  since the test's first event;
* ``{"source": "wire", "protocol": "stomp", "frame": 5, "command": "COMMIT", "destination": null,
  "connection": 2}``: each frame the client wrote through the confirmation proxy, in order, and
  ``{"source": "wire", "protocol": "stomp", "released": "<receipt>", "after_frames": 6}``: when the
  test released a held answer.

So a failure or a deviation on a real client is shown with the operations that prove it, e.g.
stomp.py's ``COMMIT`` frame and its ``commit()`` returning before the held answer was released.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


SECRET_HEADERS = frozenset({"passcode", "password", "authorization"})


def _redacted(entry: dict[str, Any]) -> dict[str, Any]:
    """A wire entry without credentials (a CONNECT's passcode is not evidence of anything)."""
    headers = entry.get("headers")
    if not isinstance(headers, dict) or not SECRET_HEADERS & {str(k).lower() for k in headers}:
        return entry
    return {**entry, "headers": {k: ("***" if str(k).lower() in SECRET_HEADERS else v) for k, v in headers.items()}}


class ClientEvidence:
    """Collects the clients a test built and the proxies' wire logs, before the fixtures clear them."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.cuts: list[Any] = []
        self.wire: list[dict[str, Any]] | None = None

    def built(self, cut: Any) -> None:
        self.cuts.append(cut)

    def capture_wire(self, _cut: Any = None) -> None:
        """Snapshot what the client wrote (called before the proxies are cleared; only the first time)."""
        if self.wire is not None:
            return
        self.wire = []
        for protocol, proxy in (("stomp", getattr(self.env, "_proxy", None)),
                                ("amqp", getattr(self.env, "_amqp_proxy", None))):
            log = getattr(proxy, "wire_log", None)
            if log is not None:
                self.wire.extend({"source": "wire", "protocol": protocol, **_redacted(entry)} for entry in log())

    def lines(self) -> list[dict[str, Any]]:
        events = [(number, event) for number, cut in enumerate(self.cuts) for event in cut.events.of()]
        start = min((event.time for _, event in events), default=0.0)
        out: list[dict[str, Any]] = [
            {"source": "client", "client": number, "index": event.index, "at": round(event.time - start, 6),
             "kind": event.kind, "detail": _jsonable(dict(event.detail))}
            for number, event in sorted(events, key=lambda pair: (pair[1].time, pair[0], pair[1].index))]
        return out + list(self.wire or [])

    def write(self, path: Path) -> None:
        lines = self.lines()
        if not lines:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines), encoding="utf-8")
