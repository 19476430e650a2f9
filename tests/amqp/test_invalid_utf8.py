"""Invalid UTF-8 where AMQP wants a string (a link name, an address, the container id) is answered with an
AMQP error, not a dropped connection (issue 20: 82 fuzzed cases raised UnicodeDecodeError). The client sets
the raw bytes through proton's C API, which the Python API would not let it do."""

from __future__ import annotations

from proton import Endpoint, Message
from tests.amqp.inmemory import InMemoryPair

from ackspec.reference.amqp.proton_c import ffi, lib

BAD = b"bad-\xff\xfe-name"


def _sender(pair: InMemoryPair, name: bytes, address: bytes | None) -> object:
    link = lib.pn_sender(pair.session._impl, name)
    if address is not None:
        lib.pn_terminus_set_address(lib.pn_link_target(link), address)
    lib.pn_link_open(link)
    pair.pump()
    return link


def _still_usable(pair: InMemoryPair) -> bool:
    sender = pair.session.sender("ok")
    sender.target.address = "/queue/utf8.ok"
    sender.open()
    pair.pump()
    dlv = sender.delivery(b"t")
    sender.send(bytes(Message(body=b"fine").encode()))
    sender.advance()
    dlv.settle()
    pair.pump()
    return pair.core.queue_depth("/queue/utf8.ok") >= 1


def test_invalid_utf8_link_name_refuses_the_link_only() -> None:
    """A link the broker sends on is named by its subscription (decoded): refused. A link the client sends
    on keeps its name as proton's bytes: accepted. Either way the connection goes on."""
    pair = InMemoryPair()
    receiver = lib.pn_receiver(pair.session._impl, BAD)
    lib.pn_terminus_set_address(lib.pn_link_source(receiver), b"/queue/utf8")
    lib.pn_link_open(receiver)
    pair.pump()
    assert lib.pn_link_state(receiver) & Endpoint.REMOTE_CLOSED
    condition = lib.pn_link_remote_condition(receiver)
    assert ffi.string(lib.pn_condition_get_name(condition)) == b"amqp:invalid-field"
    _sender(pair, BAD, b"/queue/utf8")
    assert not pair.conn.state & Endpoint.REMOTE_CLOSED
    assert _still_usable(pair)


def test_invalid_utf8_address_refuses_the_link_only() -> None:
    pair = InMemoryPair()
    link = _sender(pair, b"fine-name", b"/queue/\xc3\x28")
    assert lib.pn_link_state(link) & Endpoint.REMOTE_CLOSED
    assert _still_usable(pair)


def test_invalid_utf8_container_id_closes_with_an_error() -> None:
    pair = InMemoryPair(container="placeholder")
    lib.pn_connection_set_container(pair.conn._impl, BAD)
    pair.pump()
    assert pair.conn.state & Endpoint.REMOTE_CLOSED
    condition = pair.conn.remote_condition
    assert condition is not None and "UTF-8" in (condition.description or "")
    assert not pair.core.has_connection("amqp-1")
