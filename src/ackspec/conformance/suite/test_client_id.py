"""Client identifiers (Jakarta Messaging 6.1.2): one connection at a time holds a client id.

The client id owns a client's durable subscriptions, so two connections with the same one would share
that state; JMS makes the second ``setClientID`` fail instead. Over STOMP the id is CONNECT's
``client-id`` header, over AMQP the container id of a connection asking for
``sole-connection-for-container`` (what qpid-jms sends when a client id is set).
"""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AdapterError, Capability, Client, ConnectionLost, Indeterminate
from ackspec.conformance.harness import Harness
from ackspec.conformance.verdicts import Checks

requirement = pytest.mark.requirement


def _usable(harness: Harness, process: str, client_id: str) -> tuple[Client | None, str]:
    """A connection with ``client_id`` that completes one confirmed operation, or None and why the broker
    refused it: some brokers accept the connection and refuse it right after, so connecting alone proves
    nothing. The broker ending the connection is its refusal (AMQP closes with an error, some brokers just
    close); a timeout is none: it propagates, and the verdict is indeterminate (a broker that stops answering
    must not pass as one that refused the second connection)."""
    try:
        client = harness.client(process, client_id=client_id)
        client.unsubscribe(client.subscribe(harness.queue("client-id")))
    except ConnectionLost as exc:
        return None, str(exc)
    except Indeterminate:
        raise
    except AdapterError as exc:
        return None, str(exc)
    return client, ""


@requirement("JMS-6.1.2-CLIENT-ID-IN-USE")
def test_a_client_id_in_use_is_refused_then_free_again(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.RECEIPTS)
    client_id = f"ackspec-{harness.queue('client-id').rsplit('/', 1)[-1]}"  # unique per run
    first, why = _usable(harness, "first", client_id)
    assert first is not None, f"the first connection with client id {client_id!r} failed: {why}"
    second, _ = _usable(harness, "second", client_id)
    first.disconnect()
    third, why = _usable(harness, "third", client_id)
    checks = Checks()
    checks.check(second is None,
                 f"a second connection with client id {client_id!r} was accepted while the first was open")
    checks.check(third is not None,
                 f"once the first connection had closed, a new one with client id {client_id!r} was refused: {why}")
    checks.done()
