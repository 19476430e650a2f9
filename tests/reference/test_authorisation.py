"""Authorisation on both protocols (issue 20): per-destination read/write/admin from an ACL, the dead-letter
queue included; a client id tied to the login holding its durable subscription; backoff after failed logins.
Real sockets, the embedded broker, proton's blocking client for AMQP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.reactor import Container
from proton.utils import BlockingConnection, ConnectionClosed, LinkDetached, SendException

from ackspec.errors import AckspecError
from ackspec.reference.broker.acl import Acl, load_acl, parse_acl
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.server import EmbeddedBroker

from .raw_stomp import Raw

USERS = {"alice": "a-secret", "bob": "b-secret", "ops": "o-secret", "carol": "c-secret"}
ACL = """
# pattern          permissions       logins
/queue/orders.*    read,write        alice
/queue/orders.*    read              bob
/queue/DLQ         read              ops
/topic/prices      read,write,admin  alice
/topic/prices      read              bob
"""


def _auth() -> Authenticator:
    return Authenticator(dict(USERS), allow_anonymous=False, acl=Acl(parse_acl(ACL)))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(amqp=True, auth=_auth(), data_dir=tmp_path_factory.mktemp("authz")) as b:
        yield b


def _stomp(broker: EmbeddedBroker, login: str, **headers: str) -> Raw:
    c = Raw(broker)
    c.send("CONNECT", b"", **{"accept-version": "1.2", "host": "/", "login": login, "passcode": USERS[login],
                              **headers})
    got = c.recv()
    assert got.command == "CONNECTED", got
    return c


def _refused(c: Raw, command: str, **headers: str) -> str:
    c.send(command, b"x" if command == "SEND" else b"", **headers)
    err = c.recv()
    assert err.command == "ERROR", err
    assert c.closed_by_peer()
    return err.get("message") or ""


def _amqp(broker: EmbeddedBroker, login: str, container: str | None = None) -> BlockingConnection:
    assert broker.amqp_url is not None
    reactor = Container()
    if container is not None:
        reactor.container_id = container
    return BlockingConnection(broker.amqp_url, timeout=5, container=reactor, user=login,
                              password=USERS[login], allowed_mechs="PLAIN")


# ------------------------------------------------------------------ STOMP


def test_stomp_write_and_read_need_their_permission(broker: EmbeddedBroker) -> None:
    alice = _stomp(broker, "alice")
    alice.send("SEND", b"order", destination="/queue/orders.1", receipt="r")
    assert alice.recv().get("receipt-id") == "r"
    assert "not authorised to write" in _refused(_stomp(broker, "bob"), "SEND", destination="/queue/orders.1",
                                                 receipt="r")
    assert "not authorised to read" in _refused(_stomp(broker, "bob"), "SUBSCRIBE", destination="/queue/other",
                                                id="1")
    bob = _stomp(broker, "bob")
    bob.send("SUBSCRIBE", destination="/queue/orders.1", id="1", receipt="s")
    got = {f.command: f for f in (bob.recv(), bob.recv())}
    assert got["RECEIPT"].get("receipt-id") == "s" and got["MESSAGE"].body == b"order"


def test_stomp_dead_letter_queue_is_read_only_by_whom_the_acl_names(broker: EmbeddedBroker) -> None:
    assert "not authorised to read" in _refused(_stomp(broker, "alice"), "SUBSCRIBE", destination="/queue/DLQ",
                                                id="1")
    ops = _stomp(broker, "ops")
    ops.send("SUBSCRIBE", destination="/queue/DLQ", id="1", receipt="s")
    assert ops.recv().get("receipt-id") == "s"


def test_stomp_durable_subscription_needs_admin(broker: EmbeddedBroker) -> None:
    message = _refused(_stomp(broker, "bob", **{"client-id": "bob-1"}), "SUBSCRIBE", destination="/topic/prices",
                       id="1", **{"activemq.subscriptionName": "p"})
    assert "not authorised to a durable subscription" in message


def test_a_client_id_holding_a_durable_subscription_is_tied_to_its_login(broker: EmbeddedBroker) -> None:
    """Issue 20: bob took alice's client id, read her durable subscription and locked her out."""
    alice = _stomp(broker, "alice", **{"client-id": "alice-app"})
    alice.send("SUBSCRIBE", destination="/topic/prices", id="1", receipt="s", **{"activemq.subscriptionName": "p"})
    assert alice.recv().get("receipt-id") == "s"
    alice.send("DISCONNECT", receipt="bye")
    assert alice.recv().get("receipt-id") == "bye"
    thief = Raw(broker)
    thief.send("CONNECT", b"", **{"accept-version": "1.2", "host": "/", "login": "bob", "passcode": USERS["bob"],
                                  "client-id": "alice-app"})
    err = thief.recv()
    assert err.command == "ERROR" and "belongs to another login" in (err.get("message") or "")
    broker.restart()  # the tie is kept in the data directory
    thief = Raw(broker)
    thief.send("CONNECT", b"", **{"accept-version": "1.2", "host": "/", "login": "bob", "passcode": USERS["bob"],
                                  "client-id": "alice-app"})
    assert thief.recv().command == "ERROR"
    with pytest.raises(ConnectionClosed):
        _amqp(broker, "bob", container="alice-app")
    _stomp(broker, "alice", **{"client-id": "alice-app"}).send("DISCONNECT")


# ------------------------------------------------------------------ AMQP


def test_amqp_write_read_and_dead_letter_queue_need_their_permission(broker: EmbeddedBroker) -> None:
    alice = _amqp(broker, "alice")
    try:
        alice.create_sender("/queue/orders.amqp").send(Message(body=b"order"))
        with pytest.raises(LinkDetached, match="not authorised to read"):
            alice.create_receiver("/queue/DLQ")
    finally:
        alice.close()
    bob = _amqp(broker, "bob")
    try:
        with pytest.raises(LinkDetached, match="not authorised to write"):
            bob.create_sender("/queue/orders.amqp")
        got = bob.create_receiver("/queue/orders.amqp", credit=1).receive(timeout=5)
        assert got.body == b"order"
    finally:
        bob.close()


def test_amqp_anonymous_relay_checks_each_message(broker: EmbeddedBroker) -> None:
    bob = _amqp(broker, "bob")
    try:
        relay = bob.create_sender(None)
        with pytest.raises(SendException) as refused:
            relay.send(Message(address="/queue/orders.relay", body=b"forged"))
        assert refused.value.state == Delivery.REJECTED
    finally:
        bob.close()
    assert broker.call(lambda core: core.queue_depth("/queue/orders.relay")) == 0


# ------------------------------------------------------------------ files and backoff


def test_acl_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "acl"
    bad.write_text("/queue/a read alice\n/queue/b delete bob\n")
    with pytest.raises(AckspecError, match=r"acl:2: unknown permission"):
        load_acl(bad)
    bad.write_text("/queue/a read\n")
    with pytest.raises(AckspecError, match=r"acl:1: expected"):
        load_acl(bad)


def test_failed_logins_back_off_then_recover() -> None:
    now = [100.0]
    auth = Authenticator({"alice": "right"}, allow_anonymous=False, clock=lambda: now[0])
    for _ in range(3):
        assert auth.check("alice", "wrong") == "authentication failed: unknown login or wrong passcode"
    refusal = auth.check("alice", "right")  # even the right passcode waits: it is not looked at
    assert refusal is not None and "retry in" in refusal
    now[0] += 0.6
    assert auth.check("alice", "right") is None  # waited out, and a success clears the count
    for _ in range(3):
        auth.check("alice", "wrong")
    assert auth.throttle.wait("alice", now[0]) == pytest.approx(0.5)
    now[0] += 0.6
    auth.check("alice", "wrong")  # a fourth failure doubles the wait
    assert auth.throttle.wait("alice", now[0]) == pytest.approx(1.0)
    assert "retry in" in (auth.check("alice", "wrong") or "")  # refused by the backoff: not counted
    assert auth.throttle.wait("alice", now[0]) == pytest.approx(1.0)
    now[0] += 60
    assert auth.check("alice", "right") is None


def test_stomp_login_backoff_over_a_socket(broker: EmbeddedBroker) -> None:
    messages = []
    for _ in range(5):
        c = Raw(broker)
        c.send("CONNECT", b"", **{"accept-version": "1.2", "host": "/", "login": "carol", "passcode": "guess"})
        messages.append(c.recv().get("message") or "")
    assert messages[:3] == ["authentication failed: unknown login or wrong passcode"] * 3
    assert all("retry in" in m for m in messages[3:])
