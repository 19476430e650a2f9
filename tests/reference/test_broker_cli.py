"""``ackspec broker``: bad input is one readable line; SIGTERM stops it cleanly with exit 0."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ackspec.cli import main


@pytest.mark.parametrize("argv", [["broker", "--stomp", "nope"], ["broker", "--stomp", "h:99999"],
                                  ["broker", "--control", "x"]])
def test_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "HOST:PORT" in err or "port out of range" in err


def test_bad_users_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    users = tmp_path / "users"
    users.write_text("alice:secret\nnocolon\n")
    assert main(["broker", "--stomp", "127.0.0.1:0", "--users", str(users)]) == 2
    err = capsys.readouterr().err
    assert f"{users}:2" in err and "Traceback" not in err
    assert main(["broker", "--stomp", "127.0.0.1:0", "--users", str(tmp_path / "missing")]) == 2


def test_sigterm_exits_zero(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--data",
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("ackspec broker: stomp://127.0.0.1:")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "STOMP listening on 127.0.0.1:" in err and "Traceback" not in err


def test_anonymous_broker_warns_and_control_api_needs_its_printed_token(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0",
                             "--control", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().startswith("ackspec broker: stomp://127.0.0.1:")
        token_line = proc.stdout.readline()
        assert token_line.startswith("ackspec broker: control token ")
        assert len(token_line.split()[-1]) >= 16
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
    assert "WARNING ackspec.broker: ANONYMOUS ACCESS" in err


def test_control_api_beyond_loopback_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "--stomp", "127.0.0.1:0", "--control", "0.0.0.0:0"]) == 2
    err = capsys.readouterr().err
    assert "loopback only" in err and err.count("\n") == 1


def test_bad_acl_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    users, acl = tmp_path / "users", tmp_path / "acl"
    users.write_text("alice:secret\n")
    acl.write_text("/queue/* read,fly alice\n")
    assert main(["broker", "--stomp", "127.0.0.1:0", "--users", str(users), "--acl", str(acl)]) == 2
    err = capsys.readouterr().err
    assert f"{acl}:1: unknown permission" in err and err.count("\n") == 1


def test_control_token_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    assert main(["broker", "--stomp", "127.0.0.1:0", "--control", "127.0.0.1:0",
                 "--control-token-file", str(short)]) == 2
    err = capsys.readouterr().err
    assert "at least 16 characters" in err and err.count("\n") == 1
    token = tmp_path / "token"
    token.write_text("a-long-enough-control-token\n")
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--control",
                             "127.0.0.1:0", "--control-token-file", str(token)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("ackspec broker: stomp://")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    assert "control token" not in out and "a-long-enough-control-token" not in out + err
