"""``ackspec broker --ws``: STOMP over WebSocket with stomp.py's WebSocket transport and a raw client; a
handshake without a STOMP subprotocol is refused; one broker core for TCP and WebSocket clients."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp
import websocket

from ackspec.adapters.base import AckMode
from ackspec.adapters.stomp_py import StompPyAdapter, StompPyClient
from ackspec.conformance.rawstomp import RawStompWs, frame
from ackspec.history import Recorder


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--ws",
                             "127.0.0.1:0", "--data", str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    urls: dict[str, str] = {}
    try:
        while len(urls) < 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "broker exited"
            if line.startswith("ackspec broker: ") and "://" in line:
                url = line.split()[-1]
                urls[url.split("://")[0]] = url
        yield urls
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0 and "Traceback" not in err, err


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


def test_stomp_py_over_websocket_reaches_a_tcp_subscriber(broker: dict[str, str]) -> None:
    tcp = stomp.StompConnection12([("127.0.0.1", _port(broker["stomp"]))], auto_decode=False)
    got: list[bytes] = []
    arrived = threading.Event()

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: stomp.utils.Frame) -> None:
            got.append(frame.body)
            arrived.set()

    tcp.set_listener("l", Listener())
    tcp.connect(wait=True)
    tcp.subscribe("/queue/ws", id="s", ack="auto", headers={"receipt": "sub"})
    ws = stomp.WSStompConnection([("127.0.0.1", _port(broker["ws"]))], ws_path="/", auto_decode=False,
                                 header={"Sec-WebSocket-Protocol": "v12.stomp"}, binary_mode=True)
    ws.connect(wait=True)
    body = b"\x00\xffbinary over websocket"
    ws.send("/queue/ws", body, headers={"receipt": "r1"})
    assert arrived.wait(5), "the message sent over WebSocket never reached the TCP subscriber"
    assert got == [body]
    ws.disconnect()
    tcp.disconnect()


def test_frames_split_over_messages_and_a_receipt(broker: dict[str, str]) -> None:
    raw = RawStompWs("127.0.0.1", _port(broker["ws"]), timeout=5)
    assert raw.subprotocol == "v12.stomp"
    connect = frame("CONNECT", {"accept-version": "1.2", "host": "/"})
    raw.send(connect[:5])
    raw.send(connect[5:] + frame("SEND", {"destination": "/queue/x", "receipt": "r"}, b"b"))
    reply = raw.read_frame()
    assert reply is not None and reply.command == "CONNECTED"
    receipt = raw.read_frame()
    assert receipt is not None and receipt.headers.get("receipt-id") == "r"
    raw.close()


def test_a_handshake_without_a_stomp_subprotocol_is_refused(broker: dict[str, str]) -> None:
    with pytest.raises(websocket.WebSocketBadStatusException):
        websocket.create_connection(f"ws://127.0.0.1:{_port(broker['ws'])}/", timeout=5)


def test_an_idle_stomp_py_connection_over_websocket_stays_open(broker: dict[str, str], tmp_path: Path) -> None:
    """stomp.py's WebSocket transport gives its connect timeout to every read, and its reader takes a read
    timeout for the end of the stream: a client that waited longer than its timeout for a message lost its
    connection (test_queue_state_machine over ws:// ended with 'connection is closed'). The idle period is
    the condition under test, so it is waited out; the send after it must be confirmed by its receipt."""
    timeout = 0.5
    adapter = StompPyAdapter(broker["ws"], Recorder("idle", target=broker["ws"], path=tmp_path / "h.jsonl"),
                             timeout=timeout)
    client = adapter.client("idle")
    sub = client.subscribe("/queue/ws.idle", ack=AckMode.AUTO)
    assert client.receive(sub, timeout * 3) is None  # idle for three read timeouts: nothing was sent
    assert client.send("/queue/ws.idle", b"after idle", seq=1, producer="p1").confirmed
    delivery = client.receive(sub)
    assert delivery is not None and delivery.body == b"after idle"
    client.disconnect()


def test_a_crash_over_websocket_ends_the_reader_at_once(broker: dict[str, str], tmp_path: Path) -> None:
    """A crashed client's reader thread must end when its socket is dropped, not when a read times out
    (closing the file descriptor does not wake a thread blocked on it; shutting the socket down does)."""
    timeout = 30.0
    adapter = StompPyAdapter(broker["ws"], Recorder("crash", target=broker["ws"], path=tmp_path / "h.jsonl"),
                             timeout=timeout)
    client = adapter.client("crash")
    assert isinstance(client, StompPyClient)
    started = time.monotonic()
    client.crash()  # joins the reader for up to the timeout
    assert time.monotonic() - started < timeout / 3, "the crash waited for a read timeout to end the reader"
    assert not client.conn.transport.io_thread.is_alive()
