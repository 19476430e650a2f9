#!/usr/bin/env python3
"""Readiness probe: one STOMP 1.2 CONNECT over 127.0.0.1, success only on a CONNECTED frame.

Used by start.sh (a listening port is not enough: RabbitMQ and the JVM brokers accept TCP before
their STOMP stack answers). Standard library only, so it runs before the package is installed.
Exit 0 on CONNECTED, 1 on ERROR, refused connection, timeout or anything else.
"""

from __future__ import annotations

import argparse
import socket
import sys


def probe(port: int, login: str, passcode: str, host: str, timeout: float) -> str:
    """Returns the first frame's command line (and its message header, if an ERROR)."""
    frame = (
        f"CONNECT\naccept-version:1.2\nhost:{host}\nlogin:{login}\npasscode:{passcode}\nheart-beat:0,0\n\n\x00"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(frame)
        data = b""
        while b"\x00" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        head = data.split(b"\x00", 1)[0].decode("utf-8", "replace").lstrip("\r\n")
        if head.startswith("CONNECTED"):
            sock.sendall(b"DISCONNECT\n\n\x00")
            return "CONNECTED"
        message = next((line for line in head.splitlines() if line.startswith("message:")), "")
        return (head.splitlines()[0] if head else "<connection closed>") + (f" {message}" if message else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--login", default="guest")
    parser.add_argument("--passcode", default="guest")
    parser.add_argument("--host", default="/")
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    try:
        answer = probe(args.port, args.login, args.passcode, args.host, args.timeout)
    except OSError as exc:
        answer = f"<{exc.__class__.__name__}: {exc}>"
    if not args.quiet or answer != "CONNECTED":
        print(f"stomp 127.0.0.1:{args.port}: {answer}", file=sys.stderr if answer != "CONNECTED" else sys.stdout)
    return 0 if answer == "CONNECTED" else 1


if __name__ == "__main__":
    sys.exit(main())
