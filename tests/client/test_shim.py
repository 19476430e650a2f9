"""The JSON-lines shim protocol, end to end with the Python shim wrapping the reference client."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ackspec.adapters.cut import ClientFeature, CutError, NotApplicable
from ackspec.adapters.shim.client import ShimCUT
from ackspec.conformance.client import test_jms_send as jms
from ackspec.conformance.client.conftest import Env

SHIM = [sys.executable, "-m", "ackspec.adapters.shim"]


def test_hello_and_bad_input_get_one_line_answers() -> None:
    proc = subprocess.run(SHIM, input='not json\n{"id": 7, "op": "nope"}\n{"id": 8, "op": "shutdown"}\n',
                          capture_output=True, text=True, timeout=60, check=True)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["hello"] == "ackspec-shim" and lines[0]["version"] == 1
    assert "async-send" in lines[0]["features"]
    replies = {line.get("id"): line for line in lines[1:] if "id" in line}
    assert replies[None]["error"]["kind"] == "BadRequest"
    assert replies[7]["error"]["kind"] == "UnknownOperation"
    assert replies[8]["ok"] is True


def test_shim_client_runs_a_conformance_check(env: Env) -> None:
    cut = ShimCUT(SHIM)
    try:
        assert ClientFeature.ASYNC_SEND in cut.features
        cut.open(env.url, {})
        jms.test_rejections_reported_by_on_exception_in_send_order(cut, env, "producer")
        with pytest.raises(NotApplicable, match="context"):  # the reference client has no JMSContext
            jms.test_rejections_reported_by_on_exception_in_send_order(cut, env, "context")
        with pytest.raises(CutError) as info:
            cut.session(ack_mode=9)
        assert info.value.kind == "JMSError"
    finally:
        env.proxy.clear()
        cut.close()
