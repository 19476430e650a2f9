"""Connection-factory options and their defaults, parsed from a URL.

The defaults are the seeds' (Artemis "Guarantees of sends and commits", ActiveMQ Classic
acknowledgement docs, Solace publish window):

=================================  ========  ==============================================
option                             default   meaning
=================================  ========  ==============================================
``block_on_durable_send``          True      persistent non-transacted sends wait for the broker
``block_on_non_durable_send``      False     non-persistent sends return once written
``block_on_acknowledge``           False     ``acknowledge()`` waits for the broker's receipt
``confirmation_window_size``       -1        bytes; > 0 turns on asynchronous send
                                             acknowledgements (SendAcknowledgementHandler)
``publish_window_size``            0         Solace window; > 0: at most N unacknowledged
                                             persistent sends in flight (255 max)
``ack_event_mode``                 per-message  or ``windowed`` (one event per broker ack)
``prefetch``                       1000      ActiveMQ prefetch; 0 = pull
``optimize_acknowledge``           False     batch AUTO acks at 0.65 x prefetch or timeout
``optimize_acknowledge_timeout``   0.3       seconds
``maximum_redeliveries``           6         then a POISON ack and the dead-letter queue
``send_timeout``                   30.0      seconds a blocking send waits before
                                             raising :class:`SendTimeoutError`
``heart_beat``                     0,0       STOMP heart-beat offer ``cx,cy`` (ms)
=================================  ========  ==============================================

URL query parameters may be spelled in snake_case or in the vendors' camelCase
(``blockOnDurableSend``, ``jms.optimizeAcknowledge``, ``jms.redeliveryPolicy.maximumRedeliveries``,
``confirmationWindowSize``, ``pubAckWindowSize``), e.g.
``stomp://127.0.0.1:61613?blockOnNonDurableSend=true&pubAckWindowSize=50``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ackspec.reference.client.errors import JMSError


class AckEventMode(StrEnum):
    """Solace acknowledgement event modes (seed 004)."""

    PER_MESSAGE = "per-message"
    WINDOWED = "windowed"


MAX_PUBLISH_WINDOW = 255


@dataclass(frozen=True, slots=True)
class ClientOptions:
    block_on_durable_send: bool = True
    block_on_non_durable_send: bool = False
    block_on_acknowledge: bool = False
    confirmation_window_size: int = -1
    publish_window_size: int = 0
    ack_event_mode: AckEventMode = AckEventMode.PER_MESSAGE
    prefetch: int = 1000
    optimize_acknowledge: bool = False
    optimize_acknowledge_timeout: float = 0.3
    maximum_redeliveries: int = 6
    send_timeout: float = 30.0
    login: str | None = None
    passcode: str | None = None
    client_id: str | None = None
    heart_beat: str = "0,0"
    """STOMP CONNECT ``heart-beat`` offer ``cx,cy`` in ms: cx = we can send, cy = we want to receive."""

    def __post_init__(self) -> None:
        if not isinstance(self.ack_event_mode, AckEventMode):
            try:
                object.__setattr__(self, "ack_event_mode", AckEventMode(str(self.ack_event_mode)))
            except ValueError:
                raise JMSError(f"ack_event_mode must be per-message or windowed, not {self.ack_event_mode!r}") from None
        if not 0 <= self.publish_window_size <= MAX_PUBLISH_WINDOW:
            raise JMSError(f"publish_window_size must be 0..{MAX_PUBLISH_WINDOW}, got {self.publish_window_size}")
        if self.prefetch < 0:
            raise JMSError(f"prefetch must be >= 0, got {self.prefetch}")
        if self.optimize_acknowledge and self.prefetch == 0:
            raise JMSError("optimize_acknowledge needs prefetch > 0")
        parts = str(self.heart_beat).split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise JMSError(f"heart_beat must be 'cx,cy' with integers >= 0 (ms), not {self.heart_beat!r}")
        if self.maximum_redeliveries < -1:
            raise JMSError("maximum_redeliveries must be -1 (unlimited) or >= 0")

    def replace(self, **changes: Any) -> ClientOptions:
        return dataclasses.replace(self, **changes)


_ALIASES = {
    "pubackwindowsize": "publish_window_size",
    "pub_ack_window_size": "publish_window_size",
    "prefetchsize": "prefetch",
    "queueprefetch": "prefetch",
    "prefetchpolicy.queueprefetch": "prefetch",
    "redeliverypolicy.maximumredeliveries": "maximum_redeliveries",
    "ackeventmode": "ack_event_mode",
    "user": "login",
    "username": "login",
    "password": "passcode",
}


def _snake(name: str) -> str:
    name = name.removeprefix("jms.")
    if name.lower() in _ALIASES:
        return _ALIASES[name.lower()]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _coerce(name: str, raw: str, kind: Any) -> Any:
    text = str(kind)
    try:
        if "bool" in text:
            if raw.lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if "AckEventMode" in text:
            return AckEventMode(raw.lower().replace("_", "-"))
        if "float" in text:
            return float(raw)
        if "int" in text:
            return int(raw)
    except ValueError:
        raise JMSError(f"option {name}: cannot read {raw!r} as {text}") from None
    return raw


def parse_url(url: str, **overrides: Any) -> tuple[str, str, int, ClientOptions]:
    """Split ``scheme://[user:pass@]host:port?options`` into scheme, host, port and options."""
    parts = urlsplit(url)
    if parts.scheme not in {"stomp", "amqp"}:
        raise JMSError(f"unsupported URL scheme {parts.scheme!r} in {url!r} (stomp:// or amqp://)")
    if not parts.hostname or parts.port is None:
        raise JMSError(f"URL needs host and port: {url!r}")
    known = {f.name: f.type for f in fields(ClientOptions)}
    values: dict[str, Any] = {}
    if parts.username:
        values["login"] = parts.username
    if parts.password:
        values["passcode"] = parts.password
    for key, raw in parse_qsl(parts.query, keep_blank_values=True):
        name = _snake(key)
        if name not in known:
            raise JMSError(f"unknown connection option {key!r}")
        values[name] = _coerce(key, raw, known[name])
    for key, value in overrides.items():
        name = _snake(key)
        if name not in known:
            raise JMSError(f"unknown connection option {key!r}")
        values[name] = _coerce(key, value, known[name]) if isinstance(value, str) else value
    return parts.scheme, parts.hostname, parts.port, ClientOptions(**values)
