"""STOMP over WebSocket (``ws://`` targets): the subprotocol the handshake selects, the STOMP stream across
WebSocket messages, and binary bodies. Driven by the raw client (:class:`~ackspec.conformance.rawstomp.RawStompWs`),
which chooses where message boundaries fall; not-applicable for a target reached over TCP."""

from __future__ import annotations

import uuid

import pytest

from ackspec.adapters.base import Capability, NotSupported
from ackspec.conformance.harness import Harness
from ackspec.conformance.rawstomp import RawStompWs, frame
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


def _ws(harness: Harness) -> RawStompWs:
    if harness.settings.websocket_path is None:
        raise NotSupported(Capability.WEBSOCKET, "the target is not reached over WebSocket (ws://)")
    raw = harness.raw()
    assert isinstance(raw, RawStompWs)
    raw.text = False  # the family's rules are stated for binary messages, whatever ?frames= says
    return raw


def _connect_headers(harness: Harness) -> dict[str, str]:
    s = harness.settings
    headers = {"accept-version": "1.2", "host": s.vhost or s.host, "heart-beat": "0,0"}
    if s.login is not None:
        headers["login"] = s.login
    if s.passcode is not None:
        headers["passcode"] = s.passcode
    return headers


@requirement("STOMP-WS-SUBPROTOCOL")
def test_the_handshake_selects_v12_stomp(harness: Harness) -> None:
    raw = _ws(harness)
    reply = raw.connect(harness.settings.login, harness.settings.passcode, harness.settings.vhost)
    checks = Checks()
    checks.check(raw.subprotocol == "v12.stomp",
                 f"offered v12.stomp, v11.stomp, v10.stomp; the server selected {raw.subprotocol!r}")
    checks.check(reply is not None and reply.command == "CONNECTED" and reply.headers.get("version") == "1.2",
                 f"CONNECT over the WebSocket answered with {reply}")
    checks.done()


@requirement("STOMP-WS-STREAM-ACROSS-MESSAGES")
def test_frames_split_over_and_sharing_messages(harness: Harness) -> None:
    """CONNECT in two messages; then one message holding a SEND with a receipt, a SUBSCRIBE and half of a
    second SEND, whose rest (and a receipt request) follows in the next message."""
    harness.require(Capability.QUEUES)
    raw = _ws(harness)
    connect = frame("CONNECT", _connect_headers(harness))
    raw.send(connect[:9])
    raw.send(connect[9:])
    connected = raw.read_frame()
    checks = Checks()
    checks.check(connected is not None and connected.command == "CONNECTED",
                 f"a CONNECT split over two WebSocket messages was answered with {connected}")
    if connected is None or connected.command != "CONNECTED":
        checks.done()
        return
    q = harness.queue("ws")
    token = uuid.uuid4().hex[:8]
    first = frame("SEND", {"destination": q, "receipt": f"r1-{token}"}, b"one")
    second = frame("SEND", {"destination": q, "receipt": f"r2-{token}"}, b"two")
    subscribe = frame("SUBSCRIBE", {"destination": q, "id": "s", "ack": "auto"})
    raw.send(first + subscribe + second[:12])
    raw.send(second[12:])
    seen: dict[str, list[str]] = {"RECEIPT": [], "MESSAGE": []}
    while len(seen["RECEIPT"]) < 2 or len(seen["MESSAGE"]) < 2:
        got = raw.read_frame()
        if got is None:
            break
        seen.setdefault(got.command, []).append(got.headers.get("receipt-id", got.body.decode("utf-8", "replace")))
    checks.check(sorted(seen["RECEIPT"]) == [f"r1-{token}", f"r2-{token}"],
                 f"receipts for frames sharing and split over messages: {seen['RECEIPT']}")
    checks.check(sorted(seen["MESSAGE"]) == ["one", "two"],
                 f"messages delivered: {seen['MESSAGE']} (expected one and two)")
    checks.done()


@requirement("STOMP-WS-BINARY-BODY")
def test_a_binary_body_travels_intact(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    raw = _ws(harness)
    reply = raw.connect(harness.settings.login, harness.settings.passcode, harness.settings.vhost)
    if reply is None or reply.command != "CONNECTED":
        raise AssertionError(f"CONNECT over the WebSocket answered with {reply}")
    q = harness.queue("ws-bin")
    body = bytes(range(256)) + b"\xff\xfe\x00\xc3"
    raw.send(frame("SUBSCRIBE", {"destination": q, "id": "s", "ack": "auto", "receipt": "sub"}))
    raw.read_until("RECEIPT")
    raw.send(frame("SEND", {"destination": q, "receipt": "sent", "content-type": "application/octet-stream",
                           "content-length": str(len(body))}, body))
    got = raw.read_until("MESSAGE")
    check(got is not None and got.body == body,
          f"a {len(body)}-byte binary body arrived as {None if got is None else len(got.body)} bytes"
          + ("" if got is None or got.body == body else " that differ"))
