"""What a driver needs to know about a target beyond its URL: credentials and dialect.

Brokers agree on STOMP 1.2 but not on its extensions: which header sets the
prefetch, which header marks a message persistent, whether a ``redelivered``
flag or a delivery count is sent and under which name, where dead letters go.
Those facts live in the target's profile (data, :mod:`ackspec.spec` targets);
:class:`TargetSettings` is the driver-facing digest of a profile, with
defaults that fit a plain STOMP 1.2 broker.

Delivery-count headers, as each broker sends them over STOMP (see
``docs/conformance-matrix.md`` for the observed verdicts):

* reference broker: ``delivery-count`` (1 on first delivery, JMSXDeliveryCount
  semantics) and ``redelivered:true|false``;
* ActiveMQ 5.x: no count; ``redelivered:true`` on redelivery only (absent
  otherwise, and lost across a broker restart);
* RabbitMQ 3.10: no count on classic queues (quorum queues send
  ``x-delivery-count``, the number of *earlier* deliveries, hence base 0);
  ``redelivered`` always present;
* Artemis: ``redelivered`` present; no count over STOMP.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from ackspec.adapters.base import Capability

DEFAULT_PREFETCH_HEADERS: tuple[str, ...] = ("activemq.prefetchSize", "prefetch-count")
"""Sent together when the profile does not say which one the broker honours."""

DEFAULT_DELIVERY_COUNT_HEADERS: tuple[tuple[str, int], ...] = (
    ("delivery-count", 1),
    ("JMSXDeliveryCount", 1),
    ("x-delivery-count", 0),
)
"""(header, value on first delivery): the count is normalised to 1 = first delivery."""

STOMP_STANDARD_CAPABILITIES: frozenset[Capability] = frozenset({
    Capability.QUEUES, Capability.TOPICS, Capability.ACK_AUTO, Capability.ACK_CLIENT,
    Capability.ACK_CLIENT_INDIVIDUAL, Capability.NACK, Capability.RECEIPTS, Capability.TRANSACTIONS,
    Capability.TRANSACTIONAL_ACK, Capability.ABRUPT_DISCONNECT, Capability.HEARTBEAT,
    Capability.CUSTOM_HEADERS, Capability.BINARY_BODY,
})
"""What STOMP 1.2 itself defines. Prefetch, persistence, redelivery markers and dead-lettering are
extensions: a profile has to claim them."""


@dataclass(frozen=True, slots=True)
class TargetSettings:
    """Connection settings and protocol dialect of one target."""

    host: str = "127.0.0.1"
    port: int = 61613
    login: str | None = None
    passcode: str | None = None
    vhost: str | None = None  # STOMP ``host`` header on CONNECT (RabbitMQ: the vhost, "/")
    prefetch_headers: tuple[str, ...] = DEFAULT_PREFETCH_HEADERS
    persistent_header: str = "persistent"  # sent as ``<header>:true``; never ``false`` (RabbitMQ quirk)
    redelivered_header: str = "redelivered"
    delivery_count_headers: tuple[tuple[str, int], ...] = DEFAULT_DELIVERY_COUNT_HEADERS
    queue_prefix: str = "/queue/"
    topic_prefix: str = "/topic/"
    dead_letter_queue: str | None = None  # where dead letters go, ``{destination}`` is substituted
    max_redeliveries: int | None = None  # deliveries after the first before dead-lettering
    capabilities: frozenset[Capability] = STOMP_STANDARD_CAPABILITIES
    options: Mapping[str, Any] = field(default_factory=dict)  # anything else the profile says
    tls: bool = False  # ``stomp+ssl://`` (or ``stomps://``): TLS, verifying the broker's certificate
    websocket_path: str | None = None  # ``ws://host:port/path`` (``wss://``): STOMP over WebSocket at that path
    websocket_text: bool = False  # ``ws://…?frames=text``: frames in text messages (a listener that ignores binary)
    tls_ca: str | None = None  # ``?cafile=PATH``: the CA certificates to verify it with (default: the system's)

    def client_tls_context(self) -> ssl.SSLContext | None:
        """For a TLS target, a client context verifying the broker against :attr:`tls_ca` (or the system's CAs)."""
        return ssl.create_default_context(cafile=self.tls_ca) if self.tls else None

    @classmethod
    def from_url(cls, url: str, base: TargetSettings | None = None) -> TargetSettings:
        """Host, port and credentials from ``stomp://user:pass@host:port/?vhost=/``."""
        parts = urlsplit(url)
        settings = base or cls()
        changes: dict[str, Any] = {}
        if parts.hostname:
            changes["host"] = parts.hostname
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"bad port in target URL {url!r}") from exc
        if port is not None:
            changes["port"] = port
        if parts.username:
            changes["login"] = unquote(parts.username)
        if parts.password:
            changes["passcode"] = unquote(parts.password)
        if parts.scheme.lower() in ("stomp+ssl", "stomps", "wss"):
            changes["tls"] = True
        if parts.scheme.lower() in ("ws", "wss"):
            changes["websocket_path"] = parts.path or "/"
        for item in filter(None, parts.query.split("&")):
            key, _, value = item.partition("=")
            if key == "vhost":
                changes["vhost"] = unquote(value)
            elif key == "cafile":
                changes["tls_ca"] = unquote(value)
            elif key == "frames" and value in ("text", "binary"):
                changes["websocket_text"] = value == "text"
        return replace(settings, **changes)

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any] | None) -> TargetSettings:
        """Read the ``connection`` / ``stomp`` / ``capabilities`` sections of a profile mapping.

        Unknown keys are kept in :attr:`options`; a missing section keeps the default.
        """
        if not profile:
            return cls()
        conn: Mapping[str, Any] = _section(profile, "connection")
        stomp: Mapping[str, Any] = {**_section(profile, "stomp"), **_section(profile, "settings")}
        changes: dict[str, Any] = {}
        for key in ("login", "passcode", "vhost", "host"):
            if conn.get(key) is not None:
                changes[key] = str(conn[key])
        if conn.get("port") is not None:
            changes["port"] = int(conn["port"])
        prefetch = stomp.get("prefetch_header", stomp.get("prefetch_headers"))
        if prefetch:
            changes["prefetch_headers"] = (prefetch,) if isinstance(prefetch, str) else tuple(prefetch)
        for key in ("persistent_header", "redelivered_header", "queue_prefix", "topic_prefix",
                    "dead_letter_queue"):
            if stomp.get(key):
                changes[key] = str(stomp[key])
        if stomp.get("max_redeliveries") is not None:
            changes["max_redeliveries"] = int(stomp["max_redeliveries"])
        count = stomp.get("delivery_count_header")
        if count:
            changes["delivery_count_headers"] = ((str(count), int(stomp.get("delivery_count_base", 1))),)
        caps = profile.get("capabilities", profile.get("features"))
        if isinstance(caps, list | tuple | set | frozenset):
            changes["capabilities"] = parse_capabilities(caps)
        changes["options"] = {k: v for k, v in stomp.items()}
        return replace(cls(), **changes)


def parse_capabilities(names: Any) -> frozenset[Capability]:
    """Capability values from profile strings; unknown names are ignored (profiles list features too)."""
    known = {c.value: c for c in Capability}
    return frozenset(known[str(n)] for n in names if str(n) in known)


def _section(profile: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = profile.get(name)
    return value if isinstance(value, Mapping) else {}
