"""The AMQP confirmation proxy's reading of what a client sends, as clients other than proton write it.

Qpid JMS (proton-j) describes the coordinator's declare and discharge by their numeric codes and,
to a broker offering ANONYMOUS-RELAY, sends every message on one link with a null target, naming
the destination in the message's ``to``: the proxy must see a COMMIT, an ABORT and a SEND to that
queue in both cases, or its gates never hold them.
"""

from __future__ import annotations

import pytest
from proton import Described, Message, symbol, ulong

from ackspec.conformance.client.proxies.amqp import _coordinator_command, _message_to, _stomp_name


def encoded(body: object = None, address: str | None = None) -> bytes:
    msg = Message(body=body)
    if address is not None:
        msg.address = address
    return bytes(msg.encode())


@pytest.mark.parametrize("descriptor", [ulong(0x31), symbol("amqp:declare:list")])
def test_declare_by_code_or_symbol_is_begin(descriptor: object) -> None:
    assert _coordinator_command(encoded(Described(descriptor, []))) == "BEGIN"


@pytest.mark.parametrize("descriptor", [ulong(0x32), symbol("amqp:discharge:list")])
@pytest.mark.parametrize(("fail", "command"), [(False, "COMMIT"), (True, "ABORT")])
def test_discharge_by_code_or_symbol_is_commit_or_abort(descriptor: object, fail: bool, command: str) -> None:
    assert _coordinator_command(encoded(Described(descriptor, [b"tx-1", fail]))) == command


def test_other_coordinator_payloads_stay_sends() -> None:
    assert _coordinator_command(encoded(Described(ulong(0x99), []))) == "SEND"
    assert _coordinator_command(b"\x00not a message") == "SEND"


def test_anonymous_relay_destination_is_the_messages_to() -> None:
    assert _message_to(encoded(b"x", address="/queue/cc.a")) == "/queue/cc.a"
    assert _message_to(encoded(b"x")) is None
    assert _message_to(b"\x00not a message") is None


@pytest.mark.parametrize(("address", "name"), [
    ("queue:///queue/cc.a.q", "/queue/cc.a.q"),  # Qpid JMS on ActiveMQ Classic, which asks for queue://
    ("queue://orders", "/queue/orders"),
    ("topic://prices", "/topic/prices"),
    ("/queue/cc.a.q", "/queue/cc.a.q"),
    ("plain", "plain"),
    (None, None),
])
def test_type_prefixed_addresses_are_matched_by_their_stomp_name(address: str | None, name: str | None) -> None:
    assert _stomp_name(address) == name
