"""``ackspec broker --ws``: STOMP over WebSocket with stomp.py's WebSocket transport and a raw client; a
handshake without a STOMP subprotocol is refused; one broker core for TCP and WebSocket clients."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp
import websocket

from ackspec.conformance.rawstomp import RawStompWs, frame


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
