"""Interop with the browser-side STOMP client ``@stomp/stompjs`` over WebSocket (``ws`` stands in for the
browser's WebSocket in Node), against ``ackspec broker --ws``: the subprotocol, receipts, NACK and
redelivery, acknowledgements.

Setup: ``bash tests/interop/setup.sh`` (``npm ci`` from the committed package-lock.json).
Skips, saying why, only when node or the packages are not installed.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
NODE = shutil.which("node")
STOMPJS = HERE / "node_modules" / "@stomp" / "stompjs"

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(not STOMPJS.is_dir(), reason="@stomp/stompjs not installed: run tests/interop/setup.sh"),
]


def test_stompjs_over_websocket_send_receipt_nack_redelivery_ack(tmp_path: Path) -> None:
    assert NODE is not None
    broker = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--ws",
                               "127.0.0.1:0", "--data", str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert broker.stdout is not None
    try:
        url = ""
        while not url.startswith("ws://"):
            line = broker.stdout.readline()
            assert line, "the broker exited before printing its ws:// URL"
            url = line.split()[-1] if line.startswith("ackspec broker: ") else ""
        proc = subprocess.run([NODE, str(HERE / "stompjs_client.js"), url, "/queue/stompjs-interop", "10"],
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.communicate(timeout=15)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["subprotocol"] == "v12.stomp"
    assert result["sent"] == 10 and result["receipts"] == 10
    assert sorted(result["received"]) == sorted(f"m{i}" for i in range(10))
    assert result["redelivered"] == {"redelivered": "true", "count": "2"}
