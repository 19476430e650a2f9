"""STOMP session (sans-IO, virtual clock): protocol behaviour per requirement, errors, faults, fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.model import CoreConfig
from ackspec.reference.faults import ConfirmPolicy, FaultRule
from ackspec.reference.stomp.codec import encode
from ackspec.reference.stomp.frames import Frame
from ackspec.reference.stomp.session import SessionConfig

from ._req import requirement
from .stomp_harness import Broker, Client


def cmds(frames: list[Frame]) -> list[str]:
    return [f.command for f in frames]


@requirement("STOMP-CONNECT-VERSION")
@pytest.mark.parametrize(("accept", "version"), [(None, None), ("1.0,1.1", "1.1"), ("1.1,1.2", "1.2")])
def test_version_negotiation(accept: str | None, version: str | None) -> None:
    b = Broker()
    c = b.client(connect=False)
    c.send("CONNECT", **({"accept-version": accept} if accept else {}))
    (f,) = c.frames()
    assert f.command == "CONNECTED" and f.get("version") == version


@requirement("STOMP-CONNECT-VERSION", "STOMP-ERROR-CLOSES")
def test_unsupported_version_is_error() -> None:
    c = Broker().client(connect=False)
    c.send("CONNECT", **{"accept-version": "1.3"})
    (f,) = c.frames()
    assert f.command == "ERROR" and f.get("version") == "1.0,1.1,1.2" and c.closed


@requirement("STOMP-CONNECT-AUTH")
def test_login_against_users() -> None:
    b = Broker(auth=Authenticator({"alice": "secret"}, allow_anonymous=False))
    bad = b.client(connect=False)
    bad.send("CONNECT", login="alice", passcode="wrong", **{"accept-version": "1.2"})
    assert cmds(bad.frames()) == ["ERROR"] and bad.closed
    anon = b.client(connect=False)
    anon.send("CONNECT", **{"accept-version": "1.2"})
    assert cmds(anon.frames()) == ["ERROR"] and anon.closed
    good = b.client(connect=False)
    good.send("STOMP", login="alice", passcode="secret", **{"accept-version": "1.2"})
    assert cmds(good.frames()) == ["CONNECTED"]


@requirement("STOMP-HEARTBEAT-NEGOTIATION", "STOMP-HEARTBEAT-DEAD-PEER")
def test_heartbeats_with_virtual_clock() -> None:
    b = Broker(session_config=SessionConfig(heartbeat_send_ms=500, heartbeat_receive_ms=1000))
    c = b.client(connect=False)
    c.send("CONNECT", **{"accept-version": "1.2", "heart-beat": "2000,1000"})
    (f,) = c.frames()
    assert f.get("heart-beat") == "1000,2000"  # we send every max(500,1000); expect theirs every max(2000,1000)
    b.tick(1.0)
    assert c.session.take_output() == b"\n"
    b.tick(0.5)
    assert c.session.take_output() == b""
    c.raw(b"\n")  # client heart-beat keeps it alive
    b.tick(3.9)
    assert not c.closed
    b.tick(0.2)
    assert c.closed


@requirement("STOMP-MESSAGE-REQUIRED-HEADERS", "STOMP-SEND-HEADERS-PASSED", "STOMP-MESSAGE-ACK-HEADER",
             "STOMP-CONTENT-LENGTH", "STOMP-SEND-BODY-INTACT")
def test_message_headers() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client")
    p.send("SEND", b"a\x00b", destination="/queue/a", foo="x:y", **{"content-length": "3"})
    (m,) = c.frames()
    assert m.command == "MESSAGE" and m.body == b"a\x00b"
    assert (m.get("subscription"), m.get("destination"), m.get("foo"), m.get("redelivered"),
            m.get("delivery-count"), m.get("content-length")) == ("s1", "/queue/a", "x:y", "false", "1", "3")
    assert m.get("message-id") and m.get("ack")


@requirement("STOMP-ACK-AUTO")
def test_auto_ack_has_no_ack_header_and_ack_is_error() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1")
    p.send("SEND", b"x", destination="/queue/a")
    (m,) = c.frames()
    assert m.get("ack") is None
    c.send("ACK", id="1", receipt="r")
    (e,) = c.frames()
    assert e.command == "ERROR" and e.get("receipt-id") == "r"


@requirement("STOMP-ACK-CLIENT-CUMULATIVE", "STOMP-ACK-CLIENT-PER-SUBSCRIPTION", "STOMP-ACK-UNACKED-NOT-CONSUMED",
             "STOMP-REDELIVERED-HEADER", "STOMP-MESSAGE-ID-STABLE")
def test_client_ack_cumulative_per_subscription_and_redelivery_on_close() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client")
    c.send("SUBSCRIBE", destination="/queue/b", id="s2", ack="client")
    for i in range(3):
        p.send("SEND", b"%d" % i, destination="/queue/a")
    p.send("SEND", b"b", destination="/queue/b")
    ms = c.frames()
    a_msgs = [m for m in ms if m.get("subscription") == "s1"]
    c.send("ACK", id=a_msgs[1].get("ack") or "")  # covers a0, a1 but not b's message
    c.session.connection_lost()
    d = b.client()
    d.send("SUBSCRIBE", destination="/queue/a", id="x", ack="client")
    d.send("SUBSCRIBE", destination="/queue/b", id="y", ack="client")
    got = d.frames()
    assert [(m.body, m.get("redelivered"), m.get("delivery-count")) for m in got] == [
        (b"2", "true", "2"), (b"b", "true", "2")]
    assert got[0].get("message-id") == a_msgs[2].get("message-id")


@requirement("STOMP-ACK-CLIENT-INDIVIDUAL", "STOMP-NACK-NOT-CONSUMED", "STOMP-DELIVERY-COUNT-HEADER")
def test_client_individual_and_nack() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client-individual")
    p.send("SEND", b"0", destination="/queue/a")
    p.send("SEND", b"1", destination="/queue/a")
    m0, m1 = c.frames()
    c.send("ACK", id=m1.get("ack") or "")
    c.send("NACK", id=m0.get("ack") or "")
    (again,) = c.frames()
    assert (again.body, again.get("redelivered"), again.get("delivery-count")) == (b"0", "true", "2")


@requirement("STOMP-NACK-CLIENT-CUMULATIVE")
def test_nack_cumulative_in_client_mode() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client", **{"activemq.prefetchSize": "2"})
    p.send("SEND", b"0", destination="/queue/a")
    p.send("SEND", b"1", destination="/queue/a")
    _m0, m1 = c.frames()
    c.send("NACK", id=m1.get("ack") or "")
    assert [(m.body, m.get("redelivered")) for m in c.frames()] == [(b"0", "true"), (b"1", "true")]


def consuming(max_redeliveries: int, *bodies: bytes) -> Client:
    """A client-individual consumer of /queue/a on a broker with ``max_redeliveries``, ``bodies`` sent to it."""
    b = Broker(CoreConfig(max_redeliveries=max_redeliveries))
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client-individual")
    for body in bodies:
        p.send("SEND", body, destination="/queue/a")
    return c


def dead_letter(c: Client) -> Frame:
    """The one message on the dead-letter queue, read by a new subscription of ``c``."""
    c.send("SUBSCRIBE", destination="/queue/DLQ", id="dlq")
    (dead,) = c.frames()
    assert dead.get("subscription") == "dlq"
    return dead


@requirement("AMQ-REDELIVERY-MAX", "AMQ-REDELIVERY-POISON-TO-DLQ")
def test_dead_letter_after_max_redeliveries() -> None:
    c = consuming(1, b"poison")
    for _ in range(2):
        (m,) = c.frames()
        c.send("NACK", id=m.get("ack") or "")
    assert c.frames() == []
    dead = dead_letter(c)
    assert dead.body == b"poison" and dead.get("original-destination") == "/queue/a"
    assert "max redeliveries" in (dead.get("dead-letter-reason") or "")


@requirement("STOMP-SUBSCRIBE-PREFETCH")
@pytest.mark.parametrize("header", ["activemq.prefetchSize", "prefetch-count"])
def test_prefetch_headers(header: str) -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client-individual", **{header: "2"})
    for i in range(5):
        p.send("SEND", b"%d" % i, destination="/queue/a")
    ms = c.frames()
    assert len(ms) == 2
    c.send("ACK", id=ms[0].get("ack") or "")
    assert [m.body for m in c.frames()] == [b"2"]


@requirement("STOMP-TX-SEND-INVISIBLE", "STOMP-TX-COMMIT-ATOMIC", "STOMP-TX-SEND-RECEIPT-IMMEDIATE")
def test_transaction_commit() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1")
    p.send("BEGIN", transaction="t", receipt="r0")
    p.send("SEND", b"x", destination="/queue/a", transaction="t", receipt="r1")
    assert cmds(p.frames()) == ["RECEIPT", "RECEIPT"]
    assert c.frames() == []
    p.send("COMMIT", transaction="t", receipt="r2")
    assert [f.get("receipt-id") for f in p.frames()] == ["r2"]
    assert [m.body for m in c.frames()] == [b"x"]


@requirement("STOMP-TX-ABORT-DISCARDS-SENDS", "STOMP-TX-ABORT-ACKS-UNDONE", "STOMP-ACK-IN-TRANSACTION")
def test_transaction_abort() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s1", ack="client-individual")
    p.send("SEND", b"x", destination="/queue/a")
    (m,) = c.frames()
    c.send("BEGIN", transaction="t")
    c.send("ACK", id=m.get("ack") or "", transaction="t")
    c.send("SEND", b"y", destination="/queue/a", transaction="t")
    c.send("ABORT", transaction="t")
    assert [(f.body, f.get("redelivered")) for f in c.frames()] == [(b"x", "true")]


@requirement("STOMP-TX-DISCONNECT-ABORTS")
def test_disconnect_aborts_transaction() -> None:
    b = Broker()
    p = b.client()
    p.send("BEGIN", transaction="t")
    p.send("SEND", b"x", destination="/queue/a", transaction="t")
    p.send("DISCONNECT", receipt="bye")
    assert [f.get("receipt-id") for f in p.frames()] == ["bye"] and p.closed
    assert b.core.queue_depth("/queue/a") == 0


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE", "STOMP-RECEIPT-ORDER", "STOMP-RECEIPT-CUMULATIVE",
             "STOMP-DISCONNECT-RECEIPT-LAST")
def test_receipts_wait_for_durability_in_order() -> None:
    b = Broker(journaling=True)
    p = b.client()
    p.send("SEND", b"x", destination="/queue/a", persistent="true")  # no receipt asked
    p.send("SEND", b"y", destination="/queue/a", receipt="r1")  # non-persistent, but after a persistent one
    p.send("DISCONNECT", receipt="bye")
    assert p.frames() == [] and not p.closed
    b.sync()
    assert [f.get("receipt-id") for f in p.frames()] == ["r1", "bye"] and p.closed


@requirement("ARTEMIS-JOURNAL-SYNC-NON-TRANSACTIONAL")
def test_sync_off_receipt_before_fsync() -> None:
    b = Broker(CoreConfig(sync_non_transactional=False), journaling=True)
    p = b.client()
    p.send("SEND", b"x", destination="/queue/a", persistent="true", receipt="r")
    assert [f.get("receipt-id") for f in p.frames()] == ["r"]


@requirement("STOMP-ERROR-CLOSES", "STOMP-ERROR-MESSAGE-HEADER", "STOMP-ERROR-RECEIPT-ID", "STOMP-ERROR-ISOLATED",
             "STOMP-SEND-DESTINATION-REQUIRED", "STOMP-SUBSCRIBE-ID-REQUIRED", "STOMP-SUBSCRIBE-ID-UNIQUE",
             "STOMP-UNSUBSCRIBE-UNKNOWN-ID", "STOMP-TX-UNKNOWN-ERROR", "STOMP-ACK-UNKNOWN-ID-ERROR",
             "STOMP-TX-BEGIN-ID-REQUIRED")
@pytest.mark.parametrize(
    ("frames", "fragment"),
    [
        ([Frame.make("SEND", b"x", receipt="r")], "destination"),
        ([Frame.make("SUBSCRIBE", destination="/queue/a", receipt="r")], "'id'"),
        ([Frame.make("SUBSCRIBE", destination="/queue/a", id="1"),
          Frame.make("SUBSCRIBE", destination="/queue/b", id="1", receipt="r")], "already in use"),
        ([Frame.make("UNSUBSCRIBE", id="nope", receipt="r")], "no subscription"),
        ([Frame.make("COMMIT", transaction="nope", receipt="r")], "unknown transaction"),
        ([Frame.make("SEND", b"x", destination="/queue/a", transaction="nope", receipt="r")], "unknown transaction"),
        ([Frame.make("BEGIN", transaction="t"), Frame.make("BEGIN", transaction="t", receipt="r")], "already open"),
        ([Frame.make("BEGIN", receipt="r")], "transaction"),
        ([Frame.make("ACK", id="12345", receipt="r")], "unknown ack id"),
        ([Frame.make("ACK", receipt="r")], "'id'"),
        ([Frame.make("SUBSCRIBE", destination="/queue/a", id="1", ack="bogus", receipt="r")], "ack mode"),
        ([Frame.make("CONNECT", receipt="r")], "already connected"),
    ],
)
def test_bad_frames_error_then_close(frames: list[Frame], fragment: str) -> None:
    b = Broker()
    bystander = b.client()
    bystander.send("SUBSCRIBE", destination="/queue/ok", id="s")
    c = b.client()
    for f in frames:
        c.raw(encode(f))
    out = c.frames()
    assert out[-1].command == "ERROR" and fragment in (out[-1].get("message") or "")
    assert out[-1].get("receipt-id") == "r"
    assert c.closed
    c.raw(encode(Frame.make("SEND", b"after", destination="/queue/ok")))
    assert c.frames() == []
    p = b.client()
    p.send("SEND", b"still", destination="/queue/ok")
    assert [m.body for m in bystander.frames()] == [b"still"]


@requirement("STOMP-ERROR-CLOSES")
def test_frame_before_connect() -> None:
    c = Broker().client(connect=False)
    c.send("SEND", b"x", destination="/queue/a")
    (e,) = c.frames()
    assert e.command == "ERROR" and "not connected" in (e.get("message") or "") and c.closed


@requirement("STOMP-FRAME-LIMITS")
def test_limits_error() -> None:
    b = Broker(session_config=SessionConfig(max_frame=1000, max_headers=5, heartbeat_send_ms=0,
                                            heartbeat_receive_ms=0))
    c = b.client()
    c.raw(b"SEND\ndestination:/queue/a\n\n" + b"x" * 2000)
    (e,) = c.frames()
    assert e.command == "ERROR" and "larger than" in (e.get("message") or "") and c.closed
    d = b.client()
    d.raw(b"SEND\n" + b"".join(b"h%d:v\n" % i for i in range(10)) + b"\n\x00")
    (e,) = d.frames()
    assert "too many headers" in (e.get("message") or "")


@requirement("STOMP-HEADER-UNDEFINED-ESCAPE", "STOMP-ERROR-CLOSES")
def test_undefined_escape_is_error() -> None:
    c = Broker().client()
    c.raw(b"SEND\ndestination:/queue/a\\t\n\n\x00")
    (e,) = c.frames()
    assert e.command == "ERROR" and c.closed


def test_stomp_10_and_11_ack_by_message_id() -> None:
    for version in ("1.0", "1.1"):
        b = Broker()
        c, p = b.client(version), b.client(version)
        c.send("SUBSCRIBE", destination="/queue/a", id="s", ack="client")
        p.send("SEND", b"x", destination="/queue/a")
        (m,) = c.frames()
        c.send("ACK", receipt="r", **{"message-id": m.get("message-id") or "", "subscription": "s"})
        assert cmds(c.frames()) == ["RECEIPT"]
        assert b.core.unacked(c.session.conn_id, "s") == []


# ---------------------------------------------------------------- faults and confirmation policies
def test_fault_receipt_delay_and_withhold() -> None:
    b = Broker()
    b.faults.add(FaultRule(receipt_delay=0.5))
    p = b.client()
    p.send("SEND", b"x", destination="/queue/a", receipt="r")
    assert p.frames() == []
    b.tick(0.6)
    assert [f.get("receipt-id") for f in p.frames()] == ["r"]
    b.faults.clear()
    b.faults.add(FaultRule(withhold_receipts=True))
    p.send("SEND", b"x", destination="/queue/a", receipt="r2")
    b.tick(5)
    assert p.frames() == []


@requirement("SOLACE-WINDOW-ACK-THIRD", "SOLACE-WINDOW-ACK-CUMULATIVE", "SOLACE-WINDOW-ACK-TIMEOUT")
def test_batch_confirm_policy() -> None:
    b = Broker()
    b.faults.add(FaultRule(confirm=ConfirmPolicy(mode="batch", window=9, timeout=1.0)))
    p = b.client()
    for i in range(4):
        p.send("SEND", b"x", destination="/queue/a", receipt=f"r{i}")
    assert [f.get("receipt-id") for f in p.frames()] == ["r2"]  # a third of 9 = 3: one receipt for r0..r2
    b.tick(0.5)
    assert p.frames() == []
    b.tick(0.6)
    assert [f.get("receipt-id") for f in p.frames()] == ["r3"]


@requirement("AMQ-ACKTYPE-POISON", "AMQ-REDELIVERY-POISON-TO-DLQ")
def test_poison_nack_dead_letters_at_once() -> None:
    c = consuming(6, b"poison", b"plain")
    poisoned, plain = c.frames()
    c.send("NACK", id=poisoned.get("ack") or "", **{"ackspec-ack-type": "1"})
    c.send("NACK", id=plain.get("ack") or "")  # no ack type: an ordinary NACK, redelivered
    assert [(m.body, m.get("redelivered")) for m in c.frames()] == [(b"plain", "true")]
    dead = dead_letter(c)
    assert dead.body == b"poison" and dead.get("original-destination") == "/queue/a"
    assert "POISON" in (dead.get("dead-letter-reason") or "")


@requirement("SOLACE-WINDOW-REJECT-PER-MESSAGE")
def test_nack_policy() -> None:
    b = Broker()
    b.faults.add(FaultRule(destination="/queue/n*", confirm=ConfirmPolicy(mode="nack", nack_every=2)))
    p = b.client()
    for i in range(4):
        p.send("SEND", b"%d" % i, destination="/queue/n1", receipt=f"r{i}")
    got = p.frames()
    assert [(f.get("receipt-id"), f.get("ackspec-nack")) for f in got] == [
        ("r0", None), ("r1", "true"), ("r2", None), ("r3", "true")]
    assert not p.closed and b.core.queue_depth("/queue/n1") == 2


@requirement("STOMP-SEND-ERROR-WHEN-UNPROCESSABLE")
def test_reject_send_and_drop_after_frames() -> None:
    b = Broker()
    b.faults.add(FaultRule(destination="/queue/bad", reject_send="no way"))
    p = b.client()
    p.send("SEND", b"x", destination="/queue/bad", receipt="r")
    (e,) = p.frames()
    assert (e.command, e.get("message"), e.get("receipt-id")) == ("ERROR", "no way", "r") and p.closed
    b.faults.clear()
    b.faults.add(FaultRule(drop_after_frames=2))
    q = b.client()
    for i in range(3):
        q.send("SEND", b"%d" % i, destination="/queue/d")
    assert q.closed and b.core.queue_depth("/queue/d") == 1  # CONNECT counts as a frame


def test_duplicate_and_delayed_delivery_faults() -> None:
    b = Broker()
    b.faults.add(FaultRule(destination="/queue/dup", duplicate_delivery=True))
    b.faults.add(FaultRule(destination="/queue/slow", delivery_delay=1.0))
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/dup", id="1", ack="client-individual")
    c.send("SUBSCRIBE", destination="/queue/slow", id="2")
    p.send("SEND", b"d", destination="/queue/dup")
    first, second = c.frames()
    assert (first.get("redelivered"), second.get("redelivered")) == ("false", "true")
    c.send("ACK", id=first.get("ack") or "")
    c.send("ACK", id=second.get("ack") or "", receipt="ok")  # acking the duplicate is fine
    assert cmds(c.frames()) == ["RECEIPT"]
    p.send("SEND", b"s", destination="/queue/slow")
    assert c.frames() == []
    b.tick(1.1)
    assert [m.body for m in c.frames()] == [b"s"]


# ---------------------------------------------------------------- fuzzing: ERROR then close, never a crash
client_frames = st.builds(
    Frame,
    st.sampled_from(["SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "ABORT", "DISCONNECT",
                     "CONNECT"]),
    st.lists(st.tuples(st.sampled_from(["destination", "id", "ack", "transaction", "receipt", "x",
                                        "prefetch-count", "persistent"]),
                       st.sampled_from(["/queue/a", "/topic/t", "1", "2", "client", "auto", "t", "true", "-1", ""])),
             max_size=4).map(tuple),
    st.binary(max_size=8).filter(lambda b: b"\x00" not in b),
)


def _check_invariants(c: Client, outputs: list[Frame]) -> None:
    errors = [i for i, f in enumerate(outputs) if f.command == "ERROR"]
    if errors:
        assert errors[0] == len(outputs) - 1, "nothing after an ERROR"
        assert c.closed
        assert outputs[-1].get("message")


@settings(max_examples=150, deadline=None)
@given(st.lists(client_frames, max_size=8))
def test_fuzz_frame_sequences(frames: list[Frame]) -> None:
    b = Broker()
    c = b.client()
    other = b.client()
    other.send("SUBSCRIBE", destination="/queue/a", id="o", ack="client-individual")
    outputs: list[Frame] = []
    for f in frames:
        c.raw(encode(f))
        outputs += c.frames()
    _check_invariants(c, outputs)
    other.frames()
    c.session.connection_lost()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120), st.data())
def test_fuzz_bytes(data: bytes, draw: st.DataObject) -> None:
    b = Broker()
    c = b.client()
    valid = encode(Frame.make("SEND", b"hello", destination="/queue/a", receipt="r"))
    if draw.draw(st.booleans()):
        raw = bytearray(valid)
        for _ in range(draw.draw(st.integers(1, 3))):
            raw[draw.draw(st.integers(0, len(raw) - 1))] = draw.draw(st.integers(0, 255))
        data = bytes(raw)
    for i in range(0, len(data), 7):
        c.raw(data[i : i + 7])
    outputs = c.frames()
    _check_invariants(c, outputs)
    if any(f.command == "ERROR" for f in outputs):
        assert c.closed


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE")
def test_hub_tracks_durable_waiters_for_group_commit() -> None:
    """hub.awaiting names the connections whose durable receipt waits for an fsync; mark_synced
    moves the ones it released to hub.released (what the server's group commit waits for)."""
    b = Broker(journaling=True)
    p1, p2, p3 = b.client(), b.client(), b.client()
    p1.send("SEND", b"a", destination="/queue/g", persistent="true", receipt="r1")
    p2.send("SEND", b"b", destination="/queue/g", persistent="true", receipt="r2")
    p3.send("SEND", b"c", destination="/queue/g", receipt="r3")  # not persistent: nothing to wait for
    assert [f.get("receipt-id") for f in p3.frames()] == ["r3"]
    hub = b.hub
    assert set(hub.awaiting) == {p1.session.conn_id, p2.session.conn_id}
    first = hub.awaiting[p1.session.conn_id]
    assert p1.frames() == [] and p2.frames() == []
    hub.mark_synced(first)  # covers p1's record only
    assert [f.get("receipt-id") for f in p1.frames()] == ["r1"] and p2.frames() == []
    assert hub.released == {p1.session.conn_id}
    assert set(hub.awaiting) == {p2.session.conn_id}
    p2.session.connection_lost()  # a connection that went away is not waited for
    assert p2.session.conn_id not in hub.awaiting
    b.sync()
    assert hub.awaiting == {}


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS")
def test_durable_subscription_kept_until_unsubscribed_by_name() -> None:
    b = Broker()
    p = b.client()
    durable = {"activemq.subscriptionName": "news-reader"}
    c = b.client(**{"client-id": "reader"})
    c.send("SUBSCRIBE", destination="/topic/news", id="s1", **durable)
    c.send("UNSUBSCRIBE", id="s1")  # the consumer goes, the subscription stays
    p.send("SEND", b"1", destination="/topic/news")
    c.session.connection_lost()
    p.send("SEND", b"2", destination="/topic/news")
    d = b.client(**{"client-id": "reader"})
    d.send("SUBSCRIBE", destination="/topic/news", id="s2", **{"durable-subscription-name": "news-reader"})
    assert [m.body for m in d.frames()] == [b"1", b"2"]
    d.send("UNSUBSCRIBE", id="s2", receipt="r", **durable)  # closes the consumer and deletes the subscription
    assert cmds(d.frames()) == ["RECEIPT"]
    p.send("SEND", b"3", destination="/topic/news")
    d.send("SUBSCRIBE", destination="/topic/news", id="s3", **durable)
    assert d.frames() == []


def test_durable_subscription_needs_a_client_id() -> None:
    c = Broker().client()
    c.send("SUBSCRIBE", destination="/topic/news", id="s1", **{"activemq.subscriptionName": "n"})
    (f,) = c.frames()
    assert f.command == "ERROR" and "client-id" in (f.get("message") or "") and c.closed
