"""The STOMP ``selector`` header on SUBSCRIBE (ActiveMQ's and Artemis's), through the sans-IO session.

STOMP 1.2 has no selectors; the suite's selector tests send one in a ``selector`` header as ActiveMQ and
Artemis read it, so the reference broker must do the same: the subscription gets only the messages whose
SEND headers (string properties) match, and an invalid selector is an ERROR naming what and where, with
the connection closed (JMS 3.8.1: InvalidSelectorException when the consumer is made), not a subscription
with the selector ignored.
"""

from __future__ import annotations

import re

import pytest

from ackspec.reference.stomp.frames import Frame

from ._req import requirement
from .stomp_harness import Broker, Client

Q = "/queue/colours"
T = "/topic/colours"
RED = "colour = 'red'"


def send_colours(p: Client, destination: str, colours: list[str], **headers: str) -> None:
    for i, colour in enumerate(colours):
        p.send("SEND", f"{i}-{colour}".encode(), destination=destination, colour=colour, **headers)


def messages(frames: list[Frame]) -> list[bytes]:
    assert all(f.command == "MESSAGE" for f in frames), frames
    return [f.body for f in frames]


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_selector_header_filters_a_queue_subscription() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination=Q, id="s1", selector=RED, receipt="r")
    assert [f.command for f in c.frames()] == ["RECEIPT"]
    send_colours(p, Q, ["red", "blue", "red", "blue"])
    got = c.frames()
    assert messages(got) == [b"0-red", b"2-red"]
    assert {f.get("colour") for f in got} == {"red"}
    assert b.core.queue_depth(Q) == 2  # the blue ones stay for other consumers
    other = b.client()
    other.send("SUBSCRIBE", destination=Q, id="s2")
    assert messages(other.frames()) == [b"1-blue", b"3-blue"]


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_selector_header_filters_a_topic_subscription() -> None:
    b = Broker()
    red, every, p = b.client(), b.client(), b.client()
    red.send("SUBSCRIBE", destination=T, id="s1", selector="colour IN ('red', 'green')")
    every.send("SUBSCRIBE", destination=T, id="s1")
    send_colours(p, T, ["red", "blue", "green"])
    assert messages(red.frames()) == [b"0-red", b"2-green"]
    assert messages(every.frames()) == [b"0-red", b"1-blue", b"2-green"]


@requirement("JMS-3.8-SELECTOR-FILTERS")
@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_selector_is_no_selector(blank: str) -> None:
    """JMS: an empty selector (or one of only white space) selects every message."""
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination=Q, id="s1", selector=blank)
    send_colours(p, Q, ["red", "blue"])
    assert messages(c.frames()) == [b"0-red", b"1-blue"]


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS", "AMQ-ACKTYPE-UNMATCHED",
             "JMS-DURABLE-CHANGED-SELECTOR-REPLACES")
def test_durable_subscription_with_a_selector_keeps_only_matching_messages() -> None:
    b = Broker()
    p = b.client()
    durable = {"activemq.subscriptionName": "reds"}
    c = b.client("1.2", True, **{"client-id": "reader"})
    c.send("SUBSCRIBE", b"", destination=T, id="s1", selector=RED, **durable)
    c.send("UNSUBSCRIBE", id="s1")  # the consumer goes, the subscription stays
    send_colours(p, T, ["red", "blue", "red"], persistent="true")
    assert b.core.durable_depth(("reader", "reds")) == 2
    c.send("SUBSCRIBE", b"", destination=T, id="s2", selector=RED, **durable)
    assert messages(c.frames()) == [b"0-red", b"2-red"]
    c.send("UNSUBSCRIBE", id="s2")
    send_colours(p, T, ["red"], persistent="true")
    c.send("SUBSCRIBE", b"", destination=T, id="s3", selector="colour = 'blue'", **durable)  # another selector: new
    assert c.frames() == []
    assert b.core.durable_depth(("reader", "reds")) == 0


@requirement("JMS-3.8-INVALID-SELECTOR-REFUSED", "STOMP-ERROR-CLOSES")
@pytest.mark.parametrize(("selector", "position"), [
    ("colour = ", 8),  # the end of the selector: after its last character but white space
    ("colour == 'red'", 8),
    ("(colour = 'red'", 15),
    ("colour = 'red", 9),
    ("  colour > 'red'", 9),  # the operator, counted in the header's value (white space included)
])
def test_invalid_selector_is_an_error_naming_where(selector: str, position: int) -> None:
    b = Broker()
    bystander = b.client()
    bystander.send("SUBSCRIBE", destination=Q, id="s")
    c = b.client()
    c.send("SUBSCRIBE", destination=Q, id="s1", selector=selector, receipt="r-1")
    (error,) = c.frames()
    message = error.get("message") or ""
    assert error.command == "ERROR" and message.startswith("invalid selector:"), error
    assert "selector: selector:" not in message  # said once
    assert re.search(rf"\bat position {position}\b", message), message
    assert error.get("receipt-id") == "r-1"
    assert c.closed
    assert not b.core.has_subscription(c.session.conn_id, "s1")
    assert b.tracer.counts["JMS-3.8-INVALID-SELECTOR-REFUSED"] == 1
    p = b.client()
    send_colours(p, Q, ["blue"])  # the broker goes on for everyone else
    assert messages(bystander.frames()) == [b"0-blue"]


@requirement("JMS-3.8-INVALID-SELECTOR-REFUSED", "STOMP-ERROR-CLOSES")
def test_invalid_selector_without_receipt_has_no_receipt_id() -> None:
    c = Broker().client()
    c.send("SUBSCRIBE", destination=Q, id="s1", selector="colour LIKE")
    (error,) = c.frames()
    assert error.command == "ERROR" and (error.get("message") or "").startswith("invalid selector:")
    assert error.get("receipt-id") is None
    assert c.closed


@requirement("JMS-NO-LOCAL-OWN-CONNECTION")
@pytest.mark.parametrize("header", ["activemq.noLocal", "no-local"])
def test_no_local_subscription_skips_its_own_connections_messages(header: str) -> None:
    b = Broker()
    own, other = b.client(), b.client()
    own.send("SUBSCRIBE", destination=T, id="s1", receipt="r", **{header: "true"})
    assert [f.command for f in own.frames()] == ["RECEIPT"]
    own.send("SEND", b"own", destination=T)
    other.send("SEND", b"other", destination=T)
    assert messages(own.frames()) == [b"other"]


@requirement("JMS-NO-LOCAL-DURABLE-SAME-CLIENT-ID")
def test_a_durable_no_local_subscription_skips_its_client_ids_connections() -> None:
    b = Broker()
    durable = {"activemq.subscriptionName": "d", "activemq.noLocal": "true"}
    first, other = b.client(**{"client-id": "me"}), b.client()
    first.send("SUBSCRIBE", destination=T, id="s1", receipt="r", **durable)
    first.send("UNSUBSCRIBE", id="s1", receipt="r2")  # suspended: it keeps collecting
    assert [f.command for f in first.frames()] == ["RECEIPT", "RECEIPT"]
    first.send("SEND", b"own", destination=T, persistent="true")
    other.send("SEND", b"other", destination=T, persistent="true")
    first.send("DISCONNECT")
    second = b.client(**{"client-id": "me"})
    second.send("SEND", b"same-client", destination=T, persistent="true")
    second.send("SUBSCRIBE", destination=T, id="s2", **durable)
    assert messages(second.frames()) == [b"other"]
