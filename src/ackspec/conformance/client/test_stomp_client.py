"""STOMP 1.2 client-side rules, checked on the wire by the proxy (any STOMP client)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, NotApplicable
from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.client.proxies.stomp import ConfirmationProxy
from ackspec.conformance.markers import requirement
from ackspec.reference.faults import FaultRule
from ackspec.reference.stomp import Frame

MakeCut = Callable[..., ClientUnderTest]


def frames(env: Env, command: str) -> list[tuple[int, Frame]]:
    return [(n, f) for n, f in env.stomp_proxy.client_frames if f.command == command]


HANG_UP_WINDOW = 0.3
"""Seconds the broker waits before it answers a DISCONNECT (and hangs up): a client that does not wait
for the RECEIPT hangs up within microseconds of writing the frame."""


def connection_of(proxy: ConfirmationProxy) -> int:
    """The proxy's number of the one connection the client under test opened so far."""
    [link] = {n for n, f in proxy.client_frames if f.command in ("CONNECT", "STOMP")}
    return link


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
    # The broker answers the DISCONNECT, and then hangs up, only after HANG_UP_WINDOW: a client that
    # waits for the RECEIPT sees the broker end the connection; one that does not hangs up first.
    env.broker.faults.add(FaultRule(receipt_delay=HANG_UP_WINDOW))
    link = connection_of(env.stomp_proxy)
    closing = env.background(cut.close)
    env.stomp_proxy.wait(lambda: (link, "client", "EOF") in env.stomp_proxy.endings, TIMEOUT)
    disconnects = [f for n, f in env.stomp_proxy.client_frames if n == link and f.command == "DISCONNECT"]
    assert disconnects and disconnects[-1].get("receipt"), "the client closed without a DISCONNECT carrying a receipt"
    # the broker answers only after HANG_UP_WINDOW, so a client that closes on its own RECEIPT cannot race it
    endings = [(side, what) for n, side, what in env.stomp_proxy.endings if n == link]
    receipt = ("broker", f"RECEIPT {disconnects[-1].get('receipt')}")
    assert receipt in endings and endings.index(receipt) < endings.index(("client", "EOF")), \
        f"the client closed its socket before the DISCONNECT receipt: {endings}"
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


INTERVAL_MS = 40
MARGIN = 5
"""A heart-beat gap may be up to MARGIN x the interval: the machine is shared, and STOMP asks
receivers to allow a margin too. A client that does not heart-beat at all leaves gaps of seconds."""
DEAD_PEER_WAIT = 50 * INTERVAL_MS / 1000
"""How long a silent broker is given before a client that promises dead-peer detection has failed."""


@requirement("STOMP-HEARTBEAT-NEGOTIATION")
def test_client_heart_beats_at_the_negotiated_interval(make_cut: MakeCut, env: Env) -> None:
    env._proxy.connected_heart_beat = f"0,{INTERVAL_MS}"  # the server wants a beat every 40 ms
    cut = make_cut(heart_beat=f"{INTERVAL_MS},0")
    proxy = env.stomp_proxy  # not applicable to an AMQP client
    cut.require(ClientFeature.HEARTBEAT)
    link = connection_of(proxy)
    offer = next(f.get("heart-beat") for n, f in proxy.client_frames if n == link)
    assert offer is not None and re.fullmatch(r"\d+,\d+", offer), f"malformed heart-beat offer {offer!r}"

    def beats() -> list[float]:
        return [t for n, t, beat in proxy.client_writes if n == link and beat]

    assert proxy.wait(lambda: len(beats()) >= 6, TIMEOUT), "the client sent no heart-beats while idle"
    times = [t for n, t, _ in proxy.client_writes if n == link]
    start = times.index(beats()[0])
    gaps = [b - a for a, b in zip(times[start:], times[start + 1:], strict=False)][:5]
    assert max(gaps) <= MARGIN * INTERVAL_MS / 1000, f"heart-beat gaps {gaps} exceed the interval"


ROUND = 5
"""Receipted sends in the no-heart-beat round, each receipt held back by the broker for 2 would-be intervals."""


@requirement("STOMP-HEARTBEAT-NONE-WHEN-ZERO")
@pytest.mark.parametrize(("offer", "answer"), [("0,0", f"0,{INTERVAL_MS}"), (f"{INTERVAL_MS},0", "0,0")],
                         ids=["client-cannot-send", "server-wants-none"])
def test_client_sends_no_heart_beats_when_none_were_negotiated(make_cut: MakeCut, env: Env, offer: str,
                                                                answer: str) -> None:
    env._proxy.connected_heart_beat = answer
    cut = make_cut(heart_beat=offer)
    proxy = env.stomp_proxy  # not applicable to an AMQP client
    cut.require(ClientFeature.HEARTBEAT, ClientFeature.SYNC_SEND_CONFIRMED)
    link = connection_of(proxy)
    q = env.queue()
    delay = 2 * INTERVAL_MS / 1000
    env.broker.faults.add(FaultRule(destination=q, receipt_delay=delay))
    p = cut.producer(cut.session())
    started = time.monotonic()
    for i in range(ROUND):  # each send returns on its late receipt: the client is idle meanwhile
        cut.sync_send(p, q, b"%d" % i)
    spanned = time.monotonic() - started
    assert spanned >= ROUND * delay, f"the round took {spanned:.3f}s: receipts were not delayed, nothing was checked"
    assert proxy.settle(), "the proxy did not catch up with what the client wrote"
    beats = [t - started for n, t, beat in proxy.client_writes if n == link and beat]
    assert not beats, (f"heart-beats at {[round(b, 3) for b in beats]}s of the {spanned:.3f}s round although "
                       f"none were negotiated (offer {offer}, answer {answer})")


@requirement("STOMP-HEARTBEAT-DEAD-PEER")
def test_client_drops_a_silent_broker(make_cut: MakeCut, env: Env) -> None:
    env._proxy.connected_heart_beat = f"{INTERVAL_MS},0"  # the server promises a beat every 40 ms (and sends none)
    cut = make_cut(heart_beat=f"0,{INTERVAL_MS}")
    proxy = env.stomp_proxy  # not applicable to an AMQP client
    cut.require(ClientFeature.HEARTBEAT)
    link = connection_of(proxy)
    dropped = proxy.wait(lambda: link in proxy.closed_links, DEAD_PEER_WAIT)
    if ClientFeature.DEAD_PEER in cut.features:
        assert dropped, f"{cut.name} promises dead-peer detection but kept a silent broker for {DEAD_PEER_WAIT}s"
    elif not dropped:
        raise NotApplicable(f"{cut.name} does not treat a silent broker as dead (a MAY rule)")
