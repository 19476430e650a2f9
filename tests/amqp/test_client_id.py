"""A JMS client id over AMQP: the container id of a connection asking for ``sole-connection-for-container``.

The AMQP JMS mapping has a client that sets a client id ask for that capability; a broker offering it
refuses a second connection of the same container id while the first is open (JMS 6.1.2) by opening and
closing at once with ``amqp:invalid-field`` naming ``container-id``. Whatever the refused client still
sends is not handled. Connections that do not ask may share a container id.
"""

from __future__ import annotations

from proton import Endpoint, Message, symbol
from tests.amqp.inmemory import InMemoryPair
from tests.reference._req import requirement

Q = "/queue/client-id"


def _opened(pair: InMemoryPair) -> bool:
    pair.pump()
    return bool(pair.conn.state & Endpoint.REMOTE_ACTIVE) and not pair.conn.state & Endpoint.REMOTE_CLOSED


@requirement("JMS-6.1.2-CLIENT-ID-IN-USE")
def test_a_second_sole_connection_of_a_container_is_refused_until_the_first_closes() -> None:
    first = InMemoryPair(container="me", sole_connection=True)
    assert _opened(first)
    assert symbol("sole-connection-for-container") in (first.conn.remote_offered_capabilities or ())
    second = InMemoryPair(hub=first.hub, conn_id="amqp-2", container="me", sole_connection=True)
    sender = second.session.sender("s")  # sent in the same read as the open: must not be handled
    sender.target.address = Q
    sender.open()
    dlv = sender.delivery(b"0")
    sender.send(bytes(Message(body=b"x").encode()))
    sender.advance()
    dlv.settle()
    assert not _opened(second)
    condition = second.conn.remote_condition
    assert condition is not None and condition.name == "amqp:invalid-field"
    assert "in use" in (condition.description or "")
    assert condition.info == {symbol("invalid-field"): symbol("container-id")}
    assert first.core.queue_depth(Q) == 0  # the refused connection's transfer went nowhere
    assert not first.core.has_connection("amqp-2")
    first.conn.close()
    first.pump()
    third = InMemoryPair(hub=first.hub, conn_id="amqp-3", container="me", sole_connection=True)
    assert _opened(third)


def test_connections_that_do_not_ask_may_share_a_container_id() -> None:
    first = InMemoryPair(container="shared")
    second = InMemoryPair(hub=first.hub, conn_id="amqp-2", container="shared")
    assert _opened(first) and _opened(second)
