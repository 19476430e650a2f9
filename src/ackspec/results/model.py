"""The results file (``results.json``) of one ``ackspec run``.

Schema ``ackspec.results/1``::

    {
      "schema": "ackspec.results/1",
      "run_id": "20261122T103200-ab12cd",
      "started": "2026-11-22T10:32:00+00:00", "finished": "...",
      "ackspec_version": "0.1.0", "code_version": "<git sha or version>",
      "seed": 1234, "strict": false, "interrupted": false,
      "target": {"url": "stomp://127.0.0.1:61613", "profile": "rabbitmq-3.10",
                 "protocol": "stomp", "adapter": "stomp.py", "kind": "broker",
                 "library": null, "version": null, "broker": null},
      "tests": [
        {"requirement": "STOMP-ACK-CLIENT-CUMULATIVE", "test": "<pytest node id>",
         "verdict": "pass", "level": "MUST", "seed": 1234, "duration": 0.12,
         "message": "", "capability": null, "history": "histories/<file>.jsonl",
         "operations": [17, 18]}
      ]
    }

One entry per (test, requirement) pair: a test citing two requirements gives two
entries. ``operations`` lists history indexes that show a failure.

A run of the client-side suite (``ackspec run --client NAME``) has ``kind: "client"``: ``url``
is ``client:NAME``, ``profile`` the client profile, ``adapter`` the client under test's driver,
``library``/``version`` the library it drove and ``broker`` what it ran against. Files without
the last four fields are broker runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ackspec.results.verdict import Verdict

RESULTS_SCHEMA = "ackspec.results/1"


class ResultsFormatError(ValueError):
    """A results file that cannot be read; the message is one readable line."""


PROTOCOL_NAMES = {"stomp": "STOMP", "amqp": "AMQP 1.0"}
"""How a protocol is named to people (target labels in the CLI, the report and the matrix)."""


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """What a run judged: a broker (``kind`` "broker"), or a client library (``kind`` "client").

    A client run names the library and its version, and the broker (a target profile name) the
    client-side suite drove it against; ``profile`` is then the client profile (spec/clients/)."""

    url: str
    profile: str | None = None
    protocol: str | None = None
    adapter: str | None = None
    kind: str = "broker"
    library: str | None = None
    version: str | None = None
    broker: str | None = None

    @property
    def is_client(self) -> bool:
        return self.kind == "client"

    def client_label(self) -> str:
        """A client run's column: ``client stomp.py 9.0.0 (stomp, reference)``: library, version,
        protocol and broker, since one library may be judged over several brokers (and "via shim" when
        a shim drove it: the shim is part of what was judged)."""
        name = " ".join(part for part in (self.library or self.url, self.version) if part)
        via = "via shim" if (self.adapter or "").startswith("shim:") else None
        where = ", ".join(part for part in (self.protocol, self.broker, via) if part)
        return f"client {name} ({where})" if where else f"client {name}"

    @property
    def label(self) -> str:
        """The target's one name everywhere (CLI, report column, matrix column): ``reference (STOMP)``.

        The profile (else the URL) with the protocol, because one broker and one profile speak
        several protocols and their verdicts must never share a column; STOMP over WebSocket is
        ``rabbitmq-3.10 (STOMP over WebSocket)``, apart from the broker's STOMP over TCP.
        """
        if self.is_client:
            return self.client_label()
        name = self.profile or self.url
        protocol = self.protocol or protocol_of_url(self.url)
        if protocol == "stomp" and self.url.lower().startswith(("ws://", "wss://")):
            return f"{name} (STOMP over WebSocket)"  # a listener of its own, with its own deviations
        return f"{name} ({PROTOCOL_NAMES.get(protocol, protocol)})" if protocol else name


def protocol_of_url(url: str) -> str:
    """``stomp`` / ``amqp`` from a target URL: ``reference+amqp://`` is AMQP, the embedded
    ``reference://`` STOMP, otherwise the scheme."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if "+" in scheme:
        return scheme.split("+")[-1]
    return "stomp" if scheme in ("reference", "embedded") else scheme


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest test class, despite the name
    requirement: str
    test: str
    verdict: Verdict
    level: str | None = None
    seed: int | None = None
    duration: float = 0.0
    message: str = ""
    capability: str | None = None
    history: str | None = None
    operations: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RunResults:
    run_id: str
    started: str
    finished: str
    target: TargetInfo
    tests: tuple[TestResult, ...]
    seed: int | None = None
    strict: bool = False
    ackspec_version: str = ""
    code_version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    """The run was cut short (Ctrl-C): its verdicts are partial and it is never conformant."""

    def to_json(self) -> str:
        data = asdict(self)
        data["schema"] = RESULTS_SCHEMA
        return json.dumps(data, indent=2, sort_keys=True)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> RunResults:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ResultsFormatError(f"{path}: no such results file") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ResultsFormatError(f"{path}: not a JSON results file ({exc})") from exc
        if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ResultsFormatError(f"{path}: unknown results schema {found!r} (expected {RESULTS_SCHEMA})")
        try:
            tests = tuple(
                TestResult(**{**t, "verdict": Verdict(t["verdict"]), "operations": tuple(t.get("operations", ()))})
                for t in data["tests"]
            )
            return cls(
                run_id=data["run_id"], started=data["started"], finished=data["finished"],
                target=TargetInfo(**data["target"]), tests=tests, seed=data.get("seed"),
                strict=data.get("strict", False), ackspec_version=data.get("ackspec_version", ""),
                code_version=data.get("code_version", ""), extra=data.get("extra", {}),
                interrupted=bool(data.get("interrupted", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultsFormatError(f"{path}: malformed results file ({exc})") from exc
