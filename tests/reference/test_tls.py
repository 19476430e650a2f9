"""TLS: the broker's STOMP (``stomp+ssl://``) and AMQP (``amqps://``) listeners with ``--tls-cert/--tls-key``
(the standard library's ssl), and the suite's drivers reaching them by those URL schemes, verifying the
certificate. Certificates are made at test time (tests/reference/tls_certs.py)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.adapters.base import AckMode, AdapterError
from ackspec.adapters.registry import open_adapter
from ackspec.adapters.settings import TargetSettings
from ackspec.adapters.stomp_py import StompPyAdapter
from ackspec.cli import main
from ackspec.conformance.rawstomp import RawStompWs
from ackspec.errors import AckspecError
from ackspec.history import Recorder
from ackspec.reference.server import EmbeddedBroker
from ackspec.reference.tls import server_context

from .tls_certs import Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(amqp=True, tls=server_context(certs.cert, certs.key)) as b:
        yield b


def test_urls_name_the_tls_schemes(broker: EmbeddedBroker) -> None:
    assert broker.stomp_url.startswith("stomp+ssl://") and (broker.amqp_url or "").startswith("amqps://")


def test_stomp_over_tls_with_the_suite_driver(broker: EmbeddedBroker, certs: Certs) -> None:
    adapter = open_adapter(f"{broker.stomp_url}?cafile={certs.ca}", Recorder("tls"))
    assert isinstance(adapter, StompPyAdapter)
    client = adapter.client("c")
    sub = client.subscribe("/queue/tls.stomp", ack=AckMode.CLIENT_INDIVIDUAL)
    assert client.send("/queue/tls.stomp", b"secret", seq=1, producer="p", persistent=True).confirmed
    got = client.receive(sub, 5)
    assert got is not None and got.body == b"secret"
    client.ack(got)
    client.disconnect()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])  # localhost: the name is verified too
def test_amqp_over_tls_with_the_suite_driver(broker: EmbeddedBroker, certs: Certs, host: str) -> None:
    url = (broker.amqp_url or "").replace("127.0.0.1", host)
    adapter = open_adapter(f"{url}?cafile={certs.ca}", Recorder("tls"))
    assert isinstance(adapter, ProtonAdapter)
    client = adapter.client("a")
    sub = client.subscribe("/queue/tls.amqp", ack=AckMode.CLIENT_INDIVIDUAL)
    assert client.send("/queue/tls.amqp", b"secret", seq=1, producer="p", persistent=True).confirmed
    got = client.receive(sub, 5)
    assert got is not None and got.body == b"secret"
    client.ack(got)
    client.disconnect()


@pytest.mark.parametrize("scheme", ["stomp", "amqp"])
def test_a_certificate_from_another_ca_is_refused(broker: EmbeddedBroker, tmp_path: Path, scheme: str) -> None:
    other = make_certs(tmp_path, "some other CA")
    url = broker.stomp_url if scheme == "stomp" else broker.amqp_url or ""
    with pytest.raises(AdapterError):
        client = open_adapter(f"{url}?cafile={other.ca}", Recorder("tls")).client("x")
        client.send("/queue/tls.never", b"x", seq=1, producer="p", persistent=True)


def test_plain_stomp_gets_no_answer_from_a_tls_port(broker: EmbeddedBroker) -> None:
    with socket.create_connection(broker.stomp_address, timeout=5) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        try:
            answer = sock.recv(100)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    assert not answer.startswith(b"CONNECTED")


def test_unusable_certificate_is_one_line(tmp_path: Path, certs: Certs, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(AckspecError, match="cannot read TLS certificate"):
        server_context(tmp_path / "missing.pem", certs.key)
    assert main(["broker", "--stomp", "127.0.0.1:0", "--tls-cert", str(certs.cert)]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert main(["broker", "--stomp", "127.0.0.1:0", "--tls-cert", str(certs.key), "--tls-key", str(certs.key)]) == 2
    err = capsys.readouterr().err
    assert "unusable TLS certificate" in err and err.count("\n") == 1


def test_standalone_broker_announces_tls_urls(certs: Certs) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--amqp",
                             "127.0.0.1:0", "--tls-cert", str(certs.cert), "--tls-key", str(certs.key)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        stomp_line, amqp_line = proc.stdout.readline(), proc.stdout.readline()
        assert stomp_line.startswith("ackspec broker: stomp+ssl://127.0.0.1:")
        assert amqp_line.startswith("ackspec broker: amqps://127.0.0.1:")
        url = stomp_line.split()[-1]
        client = StompPyAdapter(f"{url}?cafile={certs.ca}", Recorder("tls")).client("c")
        assert client.send("/queue/tls.cli", b"x", seq=1, producer="p", persistent=True).confirmed
        client.disconnect()
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


@pytest.mark.slow
@pytest.mark.parametrize(("scheme", "only"), [("stomp", "STOMP-ACK-*"), ("amqp", "AMQP-*")])
def test_the_suite_runs_over_tls(broker: EmbeddedBroker, certs: Certs, tmp_path: Path, scheme: str,
                                 only: str) -> None:
    """A suite target over TLS: every driver the suite uses (stomp.py, proton, raw STOMP sockets) verifies
    the certificate against ``?cafile=`` and the verdicts are the reference broker's usual ones."""
    url = broker.stomp_url if scheme == "stomp" else broker.amqp_url or ""
    proc = subprocess.run([sys.executable, "-m", "ackspec", "run", "--target", f"{url}?cafile={certs.ca}",
                           "--profile", "reference", "--only", only, "--out", str(tmp_path / "run")],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert " pass" in proc.stdout and "fail" not in proc.stdout.split("requirements:")[-1].splitlines()[0]


@pytest.fixture(scope="module")
def wss_broker(certs: Certs) -> Iterator[str]:
    """``ackspec broker --ws`` with ``--tls-cert/--tls-key``: the ``wss://`` URL it announces."""
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--ws",
                             "127.0.0.1:0", "--tls-cert", str(certs.cert), "--tls-key", str(certs.key)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        wss = [line.split()[-1] for line in lines if line.startswith("ackspec broker: wss://")]
        assert wss, lines
        yield wss[0]
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=15)
        assert "Traceback" not in err, err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])  # localhost: the name is verified too
def test_stomp_over_wss_with_the_suite_driver(wss_broker: str, certs: Certs, host: str) -> None:
    adapter = open_adapter(f"{wss_broker.replace('127.0.0.1', host)}?cafile={certs.ca}", Recorder("tls"))
    assert isinstance(adapter, StompPyAdapter)
    client = adapter.client("w")
    sub = client.subscribe("/queue/tls.wss", ack=AckMode.CLIENT_INDIVIDUAL)
    assert client.send("/queue/tls.wss", b"secret", seq=1, producer="p", persistent=True).confirmed
    got = client.receive(sub, 5)
    assert got is not None and got.body == b"secret"
    client.ack(got)
    client.disconnect()


def test_raw_stomp_over_wss_verifies_the_certificate(wss_broker: str, certs: Certs, tmp_path: Path) -> None:
    """The suite's raw WebSocket client (the protocol tests' driver) speaks wss:// too, and verifies."""
    def raw(cafile: Path) -> RawStompWs:
        settings = TargetSettings.from_url(f"{wss_broker}?cafile={cafile}")
        return RawStompWs(settings.host, settings.port, tls=settings.client_tls_context(),
                          path=settings.websocket_path or "/")

    client = raw(certs.ca)
    reply = client.connect()
    assert reply is not None and reply.command == "CONNECTED" and client.subprotocol == "v12.stomp"
    client.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        raw(make_certs(tmp_path, "some other CA").ca)


def test_a_wss_certificate_from_another_ca_is_refused(wss_broker: str, tmp_path: Path) -> None:
    other = make_certs(tmp_path, "some other CA")
    with pytest.raises(AdapterError):
        client = open_adapter(f"{wss_broker}?cafile={other.ca}", Recorder("tls")).client("x")
        client.send("/queue/tls.never", b"x", seq=1, producer="p", persistent=True)
