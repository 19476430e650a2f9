"""Receipts frame by frame: every client frame but CONNECT may ask for one, and a RECEIPT means processed.

The frames are the ``frame`` parameter of STOMP-RECEIPT-AFTER-PROCESSING in the catalogue, read at
collection: one case per frame. Each case speaks raw STOMP (so a missing RECEIPT is seen as such), sets
up what the frame needs, sends it with a ``receipt`` header and waits for the RECEIPT with that
receipt-id; then it checks what the RECEIPT promises for that frame, since the server sends it only once
it has processed the frame: a received SEND is on the queue, a received SUBSCRIBE delivers what is sent
next, a received UNSUBSCRIBE delivers nothing more, a received ACK survives the connection's drop, a
received COMMIT has made its SENDs visible and a received ABORT has discarded them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ackspec.conformance.harness import Harness
from ackspec.conformance.markers import requirement
from ackspec.conformance.rawstomp import RawFrame, RawStomp, frame
from ackspec.conformance.suite.support import command_of
from ackspec.spec import load_catalogue

CITED = requirement("STOMP-RECEIPT-AFTER-PROCESSING")
"""What :func:`test_a_receipt_for_each_frame` cites (the ID's one place): its ``frame`` domain builds the cases."""
AFTER_PROCESSING = str(CITED.args[0])
TX = "tx-receipt"


def _frames() -> tuple[str, ...]:
    """The frames the catalogue says may carry a receipt (the requirement's ``frame`` domain)."""
    domain = load_catalogue().get(AFTER_PROCESSING).parameters["frame"].domain
    if not isinstance(domain, tuple):
        raise pytest.UsageError(f"{AFTER_PROCESSING}: its `frame` parameter needs an enumerated domain")
    return tuple(str(f) for f in domain)


def _asked(harness: Harness, raw: RawStomp, command: str, headers: dict[str, str],
           body: bytes = b"") -> list[RawFrame]:
    """Send ``command`` asking for a receipt; fail unless the matching RECEIPT comes. Returns the MESSAGE
    frames that arrived before it."""
    rid = f"r-{command.lower()}"
    raw.send(frame(command, {**headers, "receipt": rid}, body))
    messages: list[RawFrame] = []
    while (reply := raw.read_frame(harness.timeout)) is not None and reply.command == "MESSAGE":
        messages.append(reply)
    answered = reply is not None and reply.command == "RECEIPT" and reply.headers.get("receipt-id") == rid
    detail = "" if reply is None else f" {reply.headers.get('receipt-id') or reply.headers.get('message', '')}"
    harness.check(answered, f"{command} with receipt:{rid} was answered with {command_of(reply)}{detail}")
    return messages


def _on_queue(harness: Harness, queue: str) -> list[bytes]:
    return [d.body for d in harness.drain(queue)]


def _send(harness: Harness, raw: RawStomp, q: str) -> None:
    _asked(harness, raw, "SEND", {"destination": q}, b"m-send")
    found = _on_queue(harness, q)
    harness.check(found == [b"m-send"], f"after the SEND's RECEIPT the queue held {found}, not the message")


def _subscribe(harness: Harness, raw: RawStomp, q: str) -> None:
    _asked(harness, raw, "SUBSCRIBE", {"destination": q, "id": "s1", "ack": "auto"})
    harness.client("producer").send(q, b"m-after")
    got = raw.read_until("MESSAGE", harness.timeout)
    harness.check(got is not None and got.body == b"m-after",
                  f"a message sent after the SUBSCRIBE's RECEIPT was not delivered: got {command_of(got)}")


def _unsubscribe(harness: Harness, raw: RawStomp, q: str) -> None:
    _asked(harness, raw, "SUBSCRIBE", {"destination": q, "id": "s1", "ack": "auto"})
    _asked(harness, raw, "UNSUBSCRIBE", {"id": "s1"})
    harness.client("producer").send(q, b"m-after")
    found = _on_queue(harness, q)
    harness.check(found == [b"m-after"], f"a message sent after the UNSUBSCRIBE's RECEIPT was not left on the "
                                         f"queue for the next consumer: it held {found}")


def _delivered(harness: Harness, raw: RawStomp, q: str) -> RawFrame:
    """One message sent to ``q`` and delivered on a client-individual subscription of ``raw``."""
    harness.client("producer").send(q, b"m-held")
    messages = _asked(harness, raw, "SUBSCRIBE", {"destination": q, "id": "s1", "ack": "client-individual"})
    got = messages[0] if messages else raw.read_until("MESSAGE", harness.timeout)
    if got is None:
        raise AssertionError("set-up: the message sent for the subscription was not delivered")
    return got


def _ack(harness: Harness, raw: RawStomp, q: str) -> None:
    held = _delivered(harness, raw, q)
    _asked(harness, raw, "ACK", {"id": held.headers.get("ack", "")})
    raw.close()  # dropped: an ACK its RECEIPT confirmed must hold without a DISCONNECT
    found = _on_queue(harness, q)
    harness.check(not found, f"a message whose ACK got a RECEIPT came back after the connection dropped: {found}")


def _nack(harness: Harness, raw: RawStomp, q: str) -> None:
    held = _delivered(harness, raw, q)
    _asked(harness, raw, "NACK", {"id": held.headers.get("ack", "")})
    harness.expect_dropped(q, reason="NACKed: the broker may redeliver, drop or dead-letter it")


def _begin(harness: Harness, raw: RawStomp, q: str) -> None:
    _asked(harness, raw, "BEGIN", {"transaction": TX})
    _asked(harness, raw, "ABORT", {"transaction": TX})  # the transaction the RECEIPT confirmed exists


def _commit(harness: Harness, raw: RawStomp, q: str) -> None:
    raw.send(frame("BEGIN", {"transaction": TX}))
    raw.send(frame("SEND", {"destination": q, "transaction": TX}, b"m-tx"))
    _asked(harness, raw, "COMMIT", {"transaction": TX})
    found = _on_queue(harness, q)
    harness.check(found == [b"m-tx"], f"after the COMMIT's RECEIPT the queue held {found}, not the committed SEND")


def _abort(harness: Harness, raw: RawStomp, q: str) -> None:
    raw.send(frame("BEGIN", {"transaction": TX}))
    raw.send(frame("SEND", {"destination": q, "transaction": TX}, b"m-tx"))
    _asked(harness, raw, "ABORT", {"transaction": TX})
    found = _on_queue(harness, q)
    harness.check(not found, f"after the ABORT's RECEIPT the queue held {found}: the aborted SEND was delivered")


def _disconnect(harness: Harness, raw: RawStomp, q: str) -> None:
    _asked(harness, raw, "DISCONNECT", {})


CASES: dict[str, Callable[[Harness, RawStomp, str], None]] = {
    "SEND": _send, "SUBSCRIBE": _subscribe, "UNSUBSCRIBE": _unsubscribe, "ACK": _ack, "NACK": _nack,
    "BEGIN": _begin, "COMMIT": _commit, "ABORT": _abort, "DISCONNECT": _disconnect,
}
"""What each frame's RECEIPT promises, checked; a frame the catalogue adds needs its entry here."""


@CITED
@pytest.mark.parametrize("command", _frames())
def test_a_receipt_for_each_frame(harness: Harness, command: str) -> None:
    case = CASES.get(command)
    if case is None:
        raise AssertionError(f"{AFTER_PROCESSING} lists frame {command}; test_receipt_frames.CASES has no case")
    case(harness, harness.raw_connected(), harness.queue())
