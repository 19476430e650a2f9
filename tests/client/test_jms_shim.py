"""The Java shim (adapters/java): its protocol answers, its option mapping, and how a missing build is reported.

These run the real jar (built by ``bash adapters/java/build.sh``, which scripts/install-test-tools.sh
calls); without it they are skipped, naming the build command.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from ackspec.adapters import jms_cut as jms_driver
from ackspec.adapters.clients import UnknownClient, factory
from ackspec.adapters.cut import ClientFeature, CutError, NotApplicable
from ackspec.conformance.client import test_jms_send as jms
from ackspec.conformance.client.conftest import Env

LIBRARIES = {"qpid": ("org.apache.qpid:qpid-jms-client", "2.10.0", "amqp"),
             "artemis": ("org.apache.activemq:artemis-jakarta-client", "2.40.0", "core"),
             "activemq": ("org.apache.activemq:activemq-client", "6.1.8", "openwire")}


@pytest.fixture(scope="module")
def jar() -> str:
    try:
        return str(jms_driver.shim_jar())
    except jms_driver.ShimNotBuilt as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("argument", sorted(LIBRARIES))
def test_hello_names_the_library_and_bad_input_gets_one_line(jar: str, argument: str) -> None:
    proc = subprocess.run(["java", "-jar", jar, argument],
                          input='not json\n{"id": 7, "op": "nope"}\n{"id": 8, "op": "shutdown"}\n',
                          capture_output=True, text=True, timeout=120, check=True)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    hello = lines[0]
    assert (hello["hello"], hello["version"]) == ("ackspec-shim", 1)
    assert (hello["library"], hello["library_version"], hello["protocol"]) == LIBRARIES[argument]
    assert ("async-send" in hello["features"]) == (argument != "activemq")  # Classic has no CompletionListener
    # only the Classic client's own transport chain shows the MessageAcks it writes (AckWitness)
    assert ("ack-types" in hello["features"]) == (argument == "activemq")
    assert hello["gate"] is (argument in ("artemis", "activemq"))  # core interceptors, OpenWire transport filter
    replies = {line.get("id"): line for line in lines[1:]}
    assert replies[None]["error"]["kind"] == "BadRequest"
    assert replies[7]["error"]["kind"] == "UnknownOperation"
    assert replies[8]["ok"] is True


def test_unknown_library_is_one_usage_line(jar: str) -> None:
    proc = subprocess.run(["java", "-jar", jar, "nosuch"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["usage: java -jar ackspec-jms-shim.jar artemis|activemq|qpid"]


def test_qpid_refuses_settings_it_lacks_and_keeps_a_rule(jar: str, env: Env) -> None:
    cut = factory("qpid-jms")()
    try:
        assert cut.protocol == "amqp" and ClientFeature.ASYNC_SEND in cut.features
        with pytest.raises(NotApplicable, match="confirmation_window_size"):
            cut.open(env.url_for("amqp"), {"confirmation_window_size": 1000})
        cut.open(env.url_for("amqp"), {"prefetch": 10})
        jms.test_completion_only_after_confirmation_and_sends_pipeline(cut, env)
        with pytest.raises(CutError) as info:
            cut.session(ack_mode=9)
        assert info.value.kind == "JMSError"
    finally:
        env.proxy.clear()
        cut.close()


def test_missing_jar_is_one_line_saying_how_to_build(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv(jms_driver.JAR_ENV, "/nonexistent/ackspec-jms-shim.jar")
    with pytest.raises(UnknownClient) as info:
        factory("artemis-jms")
    message = str(info.value)
    assert "\n" not in message and "bash adapters/java/build.sh" in message


def test_qpid_context_sends_commits_and_closes_through_its_own_calls(jar: str, env: Env) -> None:
    """The simplified API's verbs (feature ``context``): a transacted JMSContext's producer sends and the context
    commits (the message is then on the queue), and a closed context refuses a send (the library's
    IllegalStateRuntimeException); an unknown context handle is one BadRequest line."""
    cut = factory("qpid-jms")()
    try:
        assert ClientFeature.CONTEXT in cut.features
        cut.open(env.url_for("amqp"))
        context = cut.context(transacted=True)
        q = env.queue()
        producer = cut.producer(context)
        cut.sync_send(producer, q, b"in a transaction")
        cut.commit(context)
        assert [m.body for m in env.drain(q, 1)] == [b"in a transaction"]
        cut.close_context(context)
        with pytest.raises(CutError) as closed:
            cut.sync_send(producer, q, b"after close")
        assert closed.value.kind == "IllegalStateError"
        with pytest.raises(CutError) as unknown:
            cut.close_context("x0")
        assert unknown.value.kind == "BadRequest"
    finally:
        cut.close()
