"""The reference CUT reports acknowledgement events in terms of send handles, even when they race the send.

A window acknowledgement is read on the wire's thread and can reach the CUT before the send it
names has returned (so before the CUT knew which handle the send's wire token belongs to). Such an
event must wait for the mapping, not be reported with a raw token.
"""

from __future__ import annotations

import threading

from ackspec.adapters.refclient import RefClientCUT
from ackspec.reference.client import ClientEvent


def _sent(cut: RefClientCUT, token: str, handle: str) -> None:
    """What one sync_send does around the wire: its send event, then the handle registered on return."""
    cut._forward(ClientEvent("send", {"token": token, "thread": threading.get_ident()}))
    cut._register_token(handle)


def test_an_ack_that_overtakes_its_send_is_reported_with_handles_once_the_send_returns() -> None:
    cut = RefClientCUT()
    _sent(cut, "c1-send-1", "m1")
    cut._forward(ClientEvent("send", {"token": "c1-send-2", "thread": threading.get_ident()}))
    cut._forward(ClientEvent("window-ack", {"tokens": ("c1-send-1", "c1-send-2"), "last": "c1-send-2"}))
    assert cut.events.of("window-ack") == [], "reported before the send it names returned"
    cut._register_token("m2")
    [event] = cut.events.of("window-ack")
    assert event["sends"] == ("m1", "m2") and event["last"] == "m2"


def test_events_behind_a_held_one_wait_with_it_so_order_is_kept() -> None:
    cut = RefClientCUT()
    _sent(cut, "t1", "m1")
    cut._forward(ClientEvent("send", {"token": "t2", "thread": threading.get_ident()}))
    cut._forward(ClientEvent("send-ack", {"token": "t2"}))  # overtook its send: held
    cut._forward(ClientEvent("send-ack", {"token": "t1"}))  # resolvable, but behind the held one
    assert cut.events.of() == []
    cut._register_token("m2")
    assert [e.get("send") for e in cut.events.of("send-ack")] == ["m2", "m1"]


def test_a_send_that_failed_before_the_wire_maps_no_token() -> None:
    cut = RefClientCUT()
    _sent(cut, "t1", "m1")
    cut._register_token("m2")  # no send event of its own: must not steal t1
    cut._forward(ClientEvent("send-ack", {"token": "t1"}))
    assert [e.get("send") for e in cut.events.of("send-ack")] == ["m1"]
