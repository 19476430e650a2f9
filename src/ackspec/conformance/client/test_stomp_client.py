"""STOMP 1.2 client-side rules, checked on the wire by the proxy (any STOMP client)."""

from __future__ import annotations

from collections.abc import Callable

from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.client.cut import ClientUnderTest
from ackspec.conformance.markers import requirement
from ackspec.reference.stomp import Frame

MakeCut = Callable[..., ClientUnderTest]


def frames(env: Env, command: str) -> list[tuple[int, Frame]]:
    return [(n, f) for n, f in env.stomp_proxy.client_frames if f.command == command]


@requirement("STOMP-CONNECT-HOST")
def test_connect_names_host_and_versions(cut: ClientUnderTest, env: Env) -> None:
    connects = [f for _, f in env.stomp_proxy.client_frames if f.command in ("CONNECT", "STOMP")]
    assert connects, "no CONNECT frame seen"
    frame = connects[-1]
    assert frame.get("host"), "CONNECT without a host header"
    assert "1.2" in (frame.get("accept-version") or "").split(","), "client does not offer STOMP 1.2"


@requirement("STOMP-DISCONNECT-GRACEFUL", "STOMP-DISCONNECT-NO-FRAMES-AFTER")
def test_disconnect_waits_for_its_receipt_and_sends_nothing_after(make_cut: MakeCut, env: Env) -> None:
    cut = make_cut()
    p = cut.producer(cut.session())
    cut.sync_send(p, env.queue(), b"x")
    gate = env.stomp_proxy.hold("DISCONNECT")
    closing = env.background(cut.close)
    held = gate.wait_held(1, TIMEOUT)
    assert held, "the client closed without a DISCONNECT carrying a receipt"
    link = held[0].connection
    # The broker's RECEIPT took a round trip to come back, far longer than a client needs to close
    # its socket right after DISCONNECT, so a client that does not wait is closed by now.
    assert link not in env.stomp_proxy.closed_links, "the client closed its socket before the DISCONNECT receipt"
    gate.release()
    closing.wait()
    env.stomp_proxy.wait(lambda: link in env.stomp_proxy.closed_links, TIMEOUT)
    sent = [f.command for n, f in env.stomp_proxy.client_frames if n == link]
    assert sent[-1] == "DISCONNECT", f"frames after DISCONNECT: {sent[sent.index('DISCONNECT') + 1:]}"


@requirement("STOMP-ACK-ID-MATCHES-MESSAGE")
def test_ack_carries_the_message_ack_header(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    feeder = make_cut()
    feeder.sync_send(feeder.producer(feeder.session()), q, b"a")
    cut = make_cut()
    c = cut.consumer(cut.session(ack_mode=2), q)
    message = cut.receive(c, TIMEOUT)
    assert message is not None
    cut.acknowledge(message.handle)
    env.stomp_proxy.wait(lambda: bool(frames(env, "ACK")), TIMEOUT)
    ack_ids = {f.get("ack") for _, f in env.stomp_proxy.broker_frames if f.command == "MESSAGE"}
    acks = [f for _, f in frames(env, "ACK")]
    assert acks and all(f.get("id") in ack_ids for f in acks), "ACK id is not a MESSAGE's ack header"


@requirement("STOMP-HEADER-ESCAPING", "STOMP-CONTENT-LENGTH")
def test_headers_escaped_and_binary_bodies_framed(cut: ClientUnderTest, env: Env) -> None:
    q = env.queue()
    p = cut.producer(cut.session())
    value = "a:b\\c\nd"
    body = b"\x00binary\x00body\n\x00"
    cut.sync_send(p, q, body, properties={"tricky": value})
    [received] = env.drain(q, 1)
    assert received.body == body, "the body was cut or changed (content-length missing?)"
    assert received.get_property("tricky") == value, "header value not escaped/unescaped correctly"
