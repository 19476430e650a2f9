"""The message object, with the access rules of Jakarta Messaging 7.3.6 and 7.3.9.

Between an asynchronous ``send`` returning and its CompletionListener being called, the
application must not touch the message (7.3.9), and the provider-set headers are not
readable yet (7.3.6). The seed design (ActiveMQ, 001) makes the message *inaccessible*
for that span: every getter and setter checks a flag and raises. We do the same, and the
wire frame is built from a snapshot taken at send time, so the sender's object is never
read by the I/O thread afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

from ackspec.reference.client.errors import IllegalStateError, MessageNotAccessibleError


class DeliveryMode(IntEnum):
    NON_PERSISTENT = 1
    PERSISTENT = 2


DEFAULT_PRIORITY = 4


class Message:
    """A Jakarta-Messaging-shaped message with a bytes body and string properties."""

    __slots__ = ("_acknowledger", "_body", "_fields", "_properties", "_state")

    def __init__(self, body: bytes | str = b"", properties: Mapping[str, str] | None = None) -> None:
        self._state = "accessible"  # | "in-flight"
        self._body = body.encode() if isinstance(body, str) else bytes(body)
        self._properties: dict[str, str] = dict(properties or {})
        self._fields: dict[str, Any] = {
            "message_id": None,
            "timestamp": 0,
            "destination": None,
            "delivery_mode": DeliveryMode.PERSISTENT,
            "priority": DEFAULT_PRIORITY,
            "expiration": 0,
            "redelivered": False,
            "delivery_count": None,
            "correlation_id": None,
            "type": None,
        }
        self._acknowledger: Callable[[], None] | None = None

    # -- access control (7.3.9) -----------------------------------------------------------

    def _check(self) -> None:
        if self._state != "accessible":
            raise MessageNotAccessibleError(
                "the message was sent asynchronously and its CompletionListener has not been called yet "
                "(Jakarta Messaging 7.3.9)")

    def _set_in_flight(self, in_flight: bool) -> None:
        self._state = "in-flight" if in_flight else "accessible"  # one attribute store: atomic, no lock needed

    @property
    def accessible(self) -> bool:
        """False between an asynchronous send and its completion (never raises)."""
        return self._state == "accessible"

    # -- body and properties ----------------------------------------------------------------

    @property
    def body(self) -> bytes:
        self._check()
        return self._body

    @body.setter
    def body(self, value: bytes | str) -> None:
        self._check()
        self._body = value.encode() if isinstance(value, str) else bytes(value)

    def get_property(self, name: str) -> str | None:
        self._check()
        return self._properties.get(name)

    def set_property(self, name: str, value: str) -> None:
        self._check()
        self._properties[name] = str(value)

    @property
    def properties(self) -> dict[str, str]:
        self._check()
        return dict(self._properties)

    # -- headers (provider-set ones readable only after completion: 7.3.6) ------------------

    def _get(self, name: str) -> Any:
        self._check()
        return self._fields[name]

    def _put(self, name: str, value: Any) -> None:
        self._check()
        self._fields[name] = value

    @property
    def message_id(self) -> str | None:
        return self._get("message_id")  # type: ignore[no-any-return]

    @property
    def timestamp(self) -> int:
        return self._get("timestamp")  # type: ignore[no-any-return]

    @property
    def destination(self) -> str | None:
        return self._get("destination")  # type: ignore[no-any-return]

    @property
    def delivery_mode(self) -> DeliveryMode:
        return self._get("delivery_mode")  # type: ignore[no-any-return]

    @property
    def priority(self) -> int:
        return self._get("priority")  # type: ignore[no-any-return]

    @property
    def expiration(self) -> int:
        return self._get("expiration")  # type: ignore[no-any-return]

    @property
    def redelivered(self) -> bool:
        return self._get("redelivered")  # type: ignore[no-any-return]

    @property
    def delivery_count(self) -> int | None:
        """JMSXDeliveryCount: 1 on first delivery."""
        return self._get("delivery_count")  # type: ignore[no-any-return]

    @property
    def correlation_id(self) -> str | None:
        return self._get("correlation_id")  # type: ignore[no-any-return]

    @correlation_id.setter
    def correlation_id(self, value: str | None) -> None:
        self._put("correlation_id", value)

    @property
    def type(self) -> str | None:
        return self._get("type")  # type: ignore[no-any-return]

    @type.setter
    def type(self, value: str | None) -> None:
        self._put("type", value)

    # -- provider side --------------------------------------------------------------------

    def _provider_set(self, **values: Any) -> None:
        """Set provider-owned headers without the access check (the provider may, the app may not)."""
        self._fields.update(values)

    def _snapshot(self) -> tuple[bytes, dict[str, str], dict[str, Any]]:
        return self._body, dict(self._properties), dict(self._fields)

    def acknowledge(self) -> None:
        """CLIENT: acknowledge every message the session delivered so far; INDIVIDUAL: this one.

        Ignored under automatic modes (Jakarta Messaging 3.6)."""
        self._check()
        if self._acknowledger is None:
            return
        self._acknowledger()

    def _bind_acknowledger(self, fn: Callable[[], None] | None) -> None:
        self._acknowledger = fn

    def __repr__(self) -> str:
        if not self.accessible:
            return "<Message in flight>"
        return f"<Message id={self._fields['message_id']!r} dest={self._fields['destination']!r} {self._body[:32]!r}>"


def closed_acknowledger() -> None:
    raise IllegalStateError("acknowledge() on a message whose session or connection is closed (6.1.8, 6.2.15)")
