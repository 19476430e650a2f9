"""Interop with a STOMP client we did not write, in another language: Node's ``stompit``.

Setup: ``bash tests/interop/setup.sh`` (``npm ci`` from the committed package-lock.json).
Skips, saying why, only when node or the package is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ackspec.reference.server import EmbeddedBroker

HERE = Path(__file__).parent
NODE = shutil.which("node")
STOMPIT = HERE / "node_modules" / "stompit"

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(not STOMPIT.is_dir(), reason="stompit not installed: run tests/interop/setup.sh"),
]


def test_stompit_send_receipt_nack_redelivery_ack() -> None:
    assert NODE is not None
    with EmbeddedBroker() as broker:
        proc = subprocess.run([NODE, str(HERE / "stompit_client.js"), str(broker.port), "/queue/js-interop", "10"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["errors"] == []
        assert result["sent"] == 10 and result["receipts"] == 10
        assert sorted(result["received"]) == sorted(f"m{i}" for i in range(10))
        assert result["redelivered"] == {"redelivered": "true", "count": "2"}
        assert broker.call(lambda core: core.queue_depth("/queue/js-interop")) == 0
