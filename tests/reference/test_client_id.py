"""A client id is held by one connection at a time (JMS 6.1.2), in the core and through STOMP's CONNECT.

The core refuses to open a connection whose client id an open connection holds when either of them set it
as a JMS client does (``exclusive``: STOMP's ``client-id``, AMQP's sole-connection-for-container); the id
is free again once that connection closes, abruptly or not.
"""

from __future__ import annotations

import pytest

from ackspec.reference.broker import BrokerCore, CoreError

from ._req import requirement
from .stomp_harness import Broker


@requirement("JMS-6.1.2-CLIENT-ID-IN-USE")
@pytest.mark.parametrize("abrupt", [False, True])
def test_the_core_refuses_a_client_id_in_use_and_frees_it_on_close(abrupt: bool) -> None:
    core = BrokerCore()
    core.open("a", client_id="me", exclusive=True)
    with pytest.raises(CoreError, match="in use") as refused:
        core.open("b", client_id="me", exclusive=True)
    assert refused.value.requirement == "JMS-6.1.2-CLIENT-ID-IN-USE"
    with pytest.raises(CoreError, match="in use"):
        core.open("c", client_id="me")  # not exclusive itself, but the holder is
    assert not core.has_connection("b") and not core.has_connection("c")
    core.close("a", abrupt=abrupt)
    core.open("d", client_id="me", exclusive=True)


def test_connections_that_do_not_ask_may_share_a_client_id() -> None:
    core = BrokerCore()
    core.open("a", client_id="shared")
    core.open("b", client_id="shared")
    core.open("c")  # no client id at all
    core.open("d")


@requirement("JMS-6.1.2-CLIENT-ID-IN-USE", "STOMP-ERROR-CLOSES")
def test_stomp_connect_with_a_client_id_in_use_is_an_error_until_the_holder_disconnects() -> None:
    b = Broker()
    first = b.client(**{"client-id": "me"})
    second = b.client(connect=False)
    second.send("CONNECT", **{"accept-version": "1.2", "host": "/", "client-id": "me"})
    error = second.frames()[-1]
    assert error.command == "ERROR" and "in use" in (error.get("message") or "")
    assert second.session.close_requested
    first.send("DISCONNECT", receipt="bye")
    assert [f.command for f in first.frames()] == ["RECEIPT"]
    third = b.client(**{"client-id": "me"})  # connected (the harness asserts CONNECTED)
    assert third.session.client_id == "me"
