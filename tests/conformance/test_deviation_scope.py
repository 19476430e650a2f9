"""A deviation's ``protocols`` scope and STOMP over WebSocket: ``stomp`` is the same STOMP behaviour over
TCP and WebSocket, ``stomp-ws`` is what a broker's WebSocket listener alone does."""

from __future__ import annotations

from ackspec.brokers import BROKERS
from ackspec.conformance.target import WEBSOCKET_SCOPE, KnownDeviation, scope_protocol
from ackspec.results.model import TargetInfo


def test_a_websocket_target_is_matched_as_stomp_ws() -> None:
    assert scope_protocol("stomp", "ws://127.0.0.1:15674/ws") == WEBSOCKET_SCOPE
    assert scope_protocol("stomp", "wss://127.0.0.1:15674/ws") == WEBSOCKET_SCOPE
    assert scope_protocol("stomp", "stomp://127.0.0.1:61614") == "stomp"
    assert scope_protocol("amqp", "amqp://127.0.0.1:5672") == "amqp"
    assert scope_protocol("", "reference://embedded") is None


def test_stomp_covers_both_transports_and_stomp_ws_only_websocket() -> None:
    both = KnownDeviation("R", "why", "*test_x*", ("stomp",))
    ws_only = KnownDeviation("R", "why", "*test_x*", ("stomp-ws",))
    amqp = KnownDeviation("R", "why", "*test_x*", ("amqp",))
    node = "suite/test_a.py::test_x"
    assert both.applies_to(node, "stomp") and both.applies_to(node, WEBSOCKET_SCOPE)
    assert ws_only.applies_to(node, WEBSOCKET_SCOPE) and not ws_only.applies_to(node, "stomp")
    assert not amqp.applies_to(node, WEBSOCKET_SCOPE) and not amqp.applies_to(node, "stomp")
    assert not ws_only.applies_to("suite/test_a.py::test_y", WEBSOCKET_SCOPE)


def test_a_websocket_run_has_a_column_of_its_own() -> None:
    tcp = TargetInfo("stomp://127.0.0.1:61614", "rabbitmq-3.10", "stomp")
    ws = TargetInfo("ws://127.0.0.1:15674/ws", "rabbitmq-3.10", "stomp")
    assert tcp.label == "rabbitmq-3.10 (STOMP)"
    assert ws.label == "rabbitmq-3.10 (STOMP over WebSocket)"


def test_ci_runs_stomp_over_websocket_where_a_broker_has_it() -> None:
    assert BROKERS["rabbitmq"].ws_url == "ws://127.0.0.1:15674/ws"
    assert BROKERS["artemis"].ws_url == "ws://127.0.0.1:61617/"
    assert BROKERS["activemq6"].ws_url == "ws://127.0.0.1:61621/?frames=text"  # it ignores binary messages
    assert BROKERS["activemq"].ws_url is None
