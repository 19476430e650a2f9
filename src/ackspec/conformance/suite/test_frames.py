"""Frames: header round trip and escaping, binary bodies, ERROR semantics, heart-beats.

ERROR tests use raw sockets: a malformed frame must get an ERROR frame and then a
closed connection, never a crash, and other connections must not notice.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Capability
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness
from ackspec.conformance.rawstomp import RawStomp, frame
from ackspec.conformance.strategies import drawn
from ackspec.conformance.suite.support import command_of, is_error, raw_reply, reply_to, subscribed
from ackspec.conformance.verdicts import Checks, check, violation
from ackspec.history import PRODUCER_HEADER, SEQ_HEADER

requirement = pytest.mark.requirement

TRICKY_VALUES = ["a:b", "line1\nline2", "back\\slash", "cr\rhere", "trailing:", "ünïcødé ✓", " padded "]


@requirement("STOMP-SEND-HEADERS-PASSED", "STOMP-HEADER-ESCAPING")
def test_custom_headers_round_trip(harness: Harness) -> None:
    c, q, sub = subscribed(harness)
    plain = {"x-plain": "value", "x-number": "42", "x-empty-ish": "-"}
    tricky = {f"x-tricky-{i}": v for i, v in enumerate(TRICKY_VALUES)}
    c.send(q, b"h", seq=0, producer="p1", headers={**plain, **tricky})
    d = harness.expect_n(c, sub, 1, req.STOMP_SEND_HEADERS_PASSED)[0]
    checks = Checks()
    ours = {SEQ_HEADER: "0", PRODUCER_HEADER: "p1"}  # the suite's own user headers count too
    for k, v in {**ours, **plain}.items():
        checks.check(d.headers.get(k) == v, f"{k}: sent {v!r}, got {d.headers.get(k)!r}",
                     requirement=req.STOMP_SEND_HEADERS_PASSED)
    for k, v in tricky.items():
        checks.check(d.headers.get(k) == v, f"{k}: sent {v!r}, got {d.headers.get(k)!r}",
                     requirement=req.STOMP_HEADER_ESCAPING)
    checks.done()


@requirement("STOMP-SEND-BODY-INTACT", "STOMP-CONTENT-LENGTH")
def test_binary_bodies_intact(harness: Harness) -> None:
    c, q, sub = subscribed(harness)
    bodies = [b"\x00", b"a\x00b\x00", bytes(range(256)), b"\x00" * 1000, bytes(range(256)) * 400]
    for i, body in enumerate(bodies):
        c.send(q, body, seq=i, producer="p1")
    got = harness.expect_n(c, sub, len(bodies), req.STOMP_SEND_BODY_INTACT)
    for d in got:
        sent = bodies[d.seq] if d.seq is not None and 0 <= d.seq < len(bodies) else None
        check(d.body == sent,
              f"seq {d.seq}: body of {len(d.body)} bytes differs from the {len(sent or b'')} bytes sent",
              requirement=req.STOMP_SEND_BODY_INTACT)


@requirement("STOMP-SEND-HEADERS-PASSED", "STOMP-SEND-BODY-INTACT", "STOMP-HEADER-ESCAPING", "STOMP-CONTENT-LENGTH",
             "STOMP-MESSAGE-REQUIRED-HEADERS")
def test_round_trip_property(harness: Harness) -> None:
    """Random header values (any character but NUL: colons, backslashes, line breaks need escaping) and binary
    bodies (NULs included: only content-length frames them) survive the round trip, on MESSAGE frames that
    carry destination, message-id and subscription."""
    harness.require(Capability.CUSTOM_HEADERS, Capability.BINARY_BODY)
    c, q, sub = subscribed(harness)
    counter = iter(range(1_000_000))
    values = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)

    @hypothesis_settings(examples=25)
    @hypothesis_seed()
    @given(headers=st.dictionaries(st.from_regex(r"x-[a-z]{1,8}", fullmatch=True), values, max_size=4),
           body=st.binary(max_size=2000))
    @harness.example
    def round_trip(headers: dict[str, str], body: bytes) -> None:
        seq = next(counter)
        c.send(q, body, seq=seq, producer="p1", headers=headers)
        d = c.receive(sub)
        if d is None:
            raise violation(f"message seq {seq} never arrived", requirement=req.STOMP_SEND_BODY_INTACT)
        checks = Checks()
        for rid in (req.STOMP_SEND_BODY_INTACT, req.STOMP_CONTENT_LENGTH):
            checks.check(d.body == body, f"body {body[:30]!r} ({len(body)} bytes) arrived as {d.body[:30]!r}",
                         requirement=rid)
        sent = {**headers, SEQ_HEADER: str(seq), PRODUCER_HEADER: "p1"}
        for k, v in sent.items():
            for rid in (req.STOMP_SEND_HEADERS_PASSED, req.STOMP_HEADER_ESCAPING):
                checks.check(d.headers.get(k) == v, f"{k}={v!r} came as {d.headers.get(k)!r}", requirement=rid)
        checks.check(bool(d.destination and d.message_id and d.subscription),
                     f"MESSAGE without destination, message-id or subscription: {d.destination!r}, "
                     f"{d.message_id!r}, {d.subscription!r}", requirement=req.STOMP_MESSAGE_REQUIRED_HEADERS)
        checks.done()

    round_trip()


@requirement("STOMP-HEADER-REPEATED-FIRST-WINS")
def test_repeated_header_first_wins(harness: Harness) -> None:
    c, q, sub = subscribed(harness)
    raw = harness.raw_connected()
    raw.send(b"SEND\ndestination:" + q.encode() + b"\nx-dup:first\nx-dup:second\nreceipt:r1\n\nbody\x00")
    raw.read_until("RECEIPT")
    d = harness.expect_n(c, sub, 1)[0]
    check(d.headers.get("x-dup") == "first",
          f"repeated header x-dup arrived as {d.headers.get('x-dup')!r}, expected 'first'")


def _error_then_close(raw: RawStomp, checks: Checks, timeout: float, *, receipt: str | None = None) -> None:
    err = raw.read_until("ERROR", timeout)
    checks.check(err is not None, "bad frame got no ERROR frame",
                 requirement=req.STOMP_ERROR_CLOSES)
    if err is not None:
        checks.check(bool(err.headers.get("message") or err.body.strip()),
                     "ERROR frame explains nothing (no message header, empty body)",
                     requirement=req.STOMP_ERROR_MESSAGE_HEADER)
        if receipt is not None:
            checks.check(err.headers.get("receipt-id") == receipt,
                         f"ERROR for a frame with receipt {receipt} has receipt-id {err.headers.get('receipt-id')!r}",
                         requirement=req.STOMP_ERROR_RECEIPT_ID)
        checks.check(raw.wait_closed(timeout), "connection still open after the ERROR frame",
                     requirement=req.STOMP_ERROR_CLOSES)


def _refused(harness: Harness, data: bytes, what: str, *, requirement: str | None = None, receipt: str | None = None,
             closes: bool = False) -> None:
    """A bad frame on a fresh raw connection must be answered with an ERROR frame (else ``requirement``
    fails: ``what`` got ...). That ERROR must carry ``receipt`` as its receipt-id (STOMP-ERROR-RECEIPT-ID)
    when one is given, and the connection must then close (STOMP-ERROR-CLOSES) when ``closes``.
    Soft checks: each requirement gets its own verdict.
    """
    raw, reply = raw_reply(harness, data)
    checks = Checks()
    checks.check(is_error(reply), f"{what} got {command_of(reply)}, expected ERROR", requirement=requirement)
    if is_error(reply):
        if receipt is not None:
            checks.check(reply.headers.get("receipt-id") == receipt,
                         f"ERROR has receipt-id {reply.headers.get('receipt-id')!r}, expected {receipt!r}",
                         requirement=req.STOMP_ERROR_RECEIPT_ID)
        if closes:
            checks.check(raw.wait_closed(harness.timeout), "connection open after ERROR",
                         requirement=req.STOMP_ERROR_CLOSES)
    checks.done()


@requirement("STOMP-ERROR-CLOSES", "STOMP-ERROR-MESSAGE-HEADER", "STOMP-ERROR-ISOLATED")
def test_malformed_frame_gets_error_and_close(harness: Harness) -> None:
    raw = harness.raw_connected()  # first: a target without raw STOMP is not-applicable before anything is sent
    q = harness.queue()
    bystander = harness.client("bystander")
    sub = bystander.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    harness.send_seq(bystander, q, [0])
    raw.send(b"FOO\nbar:baz\n\n\x00")
    checks = Checks()
    _error_then_close(raw, checks, harness.timeout)
    # the other connection goes on as if nothing happened
    harness.send_seq(bystander, q, [1])
    got = harness.receive_n(bystander, sub, 2)
    checks.check([d.seq for d in got] == [0, 1],
                 f"another connection's ERROR disturbed this one: got {[d.seq for d in got]}",
                 requirement=req.STOMP_ERROR_ISOLATED)
    checks.done()


@requirement("STOMP-ERROR-RECEIPT-ID", "STOMP-SEND-DESTINATION-REQUIRED", "STOMP-ERROR-CLOSES")
def test_send_without_destination(harness: Harness) -> None:
    _refused(harness, frame("SEND", {"receipt": "r-nodest"}, b"x"),
             "SEND without destination", receipt="r-nodest", closes=True,
             requirement=req.STOMP_SEND_DESTINATION_REQUIRED)


@requirement("STOMP-HEADER-UNDEFINED-ESCAPE", "STOMP-ERROR-CLOSES")
def test_undefined_escape_is_fatal(harness: Harness) -> None:
    q = harness.queue()
    _refused(harness, b"SEND\ndestination:" + q.encode() + b"\nx-bad:tab\\there\nreceipt:r-esc\n\nx\x00",
             "undefined escape \\t", closes=True, requirement=req.STOMP_HEADER_UNDEFINED_ESCAPE)


@requirement("STOMP-SUBSCRIBE-ID-REQUIRED", "STOMP-ERROR-RECEIPT-ID")
def test_subscribe_without_id(harness: Harness) -> None:
    q = harness.queue()
    _refused(harness, frame("SUBSCRIBE", {"destination": q, "receipt": "r-noid"}),
             "SUBSCRIBE without id", receipt="r-noid", requirement=req.STOMP_SUBSCRIBE_ID_REQUIRED)


@requirement("STOMP-SUBSCRIBE-ID-UNIQUE")
def test_duplicate_subscription_id(harness: Harness) -> None:
    q = harness.queue()
    raw, first = raw_reply(harness, frame("SUBSCRIBE", {"destination": q, "id": "dup", "receipt": "r1"}))
    raw.send(frame("SUBSCRIBE", {"destination": q, "id": "dup", "receipt": "r2"}))
    second = raw.read_until("ERROR")
    check(command_of(first) == "RECEIPT" and second is not None,
          "a second SUBSCRIBE reusing an active id was not refused with ERROR")


@requirement("STOMP-UNSUBSCRIBE-UNKNOWN-ID")
def test_unsubscribe_unknown_id(harness: Harness) -> None:
    _raw, reply = raw_reply(harness, frame("UNSUBSCRIBE", {"id": "ackspec-never-subscribed", "receipt": "r1"}))
    check(is_error(reply), f"UNSUBSCRIBE of an unknown id got {command_of(reply)}")


@requirement("STOMP-HEARTBEAT-NEGOTIATION")
def test_heartbeats_negotiated_and_sent(harness: Harness) -> None:
    raw = harness.raw()
    reply = raw.connect(harness.settings.login, harness.settings.passcode, harness.settings.vhost,
                        heart_beat="0,300")
    check(reply is not None and reply.command == "CONNECTED",
          "CONNECT with heart-beat 0,300 was not answered with CONNECTED")
    assert reply is not None
    sx, _, sy = reply.headers.get("heart-beat", "0,0").partition(",")
    try:
        server_sends, server_wants = int(sx), int(sy or 0)
    except ValueError as exc:
        raise violation(
                                   f"malformed heart-beat header {reply.headers.get('heart-beat')!r}") from exc
    check(server_wants == 0 or server_wants > 0, "negative heart-beat")
    if server_sends == 0:
        return  # the server does not send heart-beats: allowed
    interval = max(server_sends, 300) / 1000
    got = raw.wait_heartbeats(1, timeout=interval * 2 + 1.0)
    check(got >= 1,
          f"server offered heart-beats every {server_sends} ms but sent none in {interval * 2 + 1.0:.1f}s")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


@requirement("STOMP-CONNECT-VERSION")
def test_server_picks_the_highest_common_version(harness: Harness) -> None:
    """Over any set of the versions the catalogue's accept-version domain lists: CONNECTED names the
    highest offered version the server supports (a version it supports is one it accepts offered alone);
    with no common version, ERROR naming its versions, then the connection closes."""
    answers: dict[tuple[str, ...], tuple[str, str | None]] = {}

    def answer(offer: tuple[str, ...]) -> tuple[str, str | None]:
        if offer not in answers:
            raw = harness.raw()
            reply = raw.connect(harness.settings.login, harness.settings.passcode, harness.settings.vhost,
                                extra={"accept-version": ",".join(offer)})
            command = command_of(reply)
            version = reply.headers.get("version", "1.0" if command == "CONNECTED" else None) if reply else None
            answers[offer] = (command, version)
            raw.close()
        return answers[offer]

    @hypothesis_settings()
    @hypothesis_seed()
    @given(offer=st.lists(drawn("STOMP-CONNECT-VERSION", "accept-version"), min_size=1, max_size=3, unique=True))
    @harness.example
    def highest_common(offer: list[str]) -> None:
        supported = [v for v in offer if answer((v,)) == ("CONNECTED", v)]
        command, version = answer(tuple(offer))
        if not supported:
            check(command == "ERROR", f"offer {offer}, none supported alone: got {command}")
            return
        best = max(supported, key=_version_key)
        check((command, version) == ("CONNECTED", best),
              f"offer {offer} (supported alone: {supported}): got {command} version {version}, expected {best}")

    highest_common()
    raw = harness.raw()
    reply = raw.connect(harness.settings.login, harness.settings.passcode, harness.settings.vhost,
                        extra={"accept-version": "0.9"})
    checks = Checks()
    checks.check(is_error(reply) and "version" in (reply.headers if reply else {}),
                 f"accept-version 0.9 (no common version) got {command_of(reply)} "
                 f"{dict(reply.headers) if reply else ''}, expected ERROR with a version header")
    checks.check(raw.wait_closed(harness.timeout),
                 "connection open after the ERROR for no common version")
    checks.done()


@requirement("STOMP-SEND-ERROR-WHEN-UNPROCESSABLE")
def test_unprocessable_send_gets_error_and_close(harness: Harness) -> None:
    """A SEND the broker cannot process (made so by fault injection: its store refuses it) is answered with
    ERROR and a closed connection, and the message is not delivered: never dropped silently."""
    from ackspec.reference.faults import FaultRule  # noqa: PLC0415  (only with the embedded broker)

    raw = harness.raw_connected()
    q = harness.queue()
    rule = harness.faults.add(FaultRule(destination=q, reject_send="cannot store (injected)", times=1))
    try:
        reply = reply_to(raw, frame("SEND", {"destination": q, "receipt": "r-unprocessable"}, b"refused"))
        closed = raw.wait_closed(harness.timeout)
    finally:
        harness.faults.remove(rule)
    delivered = harness.drain(q)
    checks = Checks()
    checks.check(is_error(reply),
                 f"an unprocessable SEND was answered with {command_of(reply)}, expected ERROR")
    checks.check(closed,
                 "connection open after the ERROR for an unprocessable SEND")
    checks.check(not delivered,
                 f"the refused SEND was delivered all the same: {len(delivered)} message(s)")
    checks.done()
