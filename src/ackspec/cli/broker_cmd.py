"""ackspec broker: run the bundled reference broker (STOMP 1.2 and AMQP 1.0) until SIGINT/SIGTERM (exit 0).

It listens for STOMP on --stomp (default 127.0.0.1:61630, a port no common broker uses:
61613 is ActiveMQ's, Artemis's and RabbitMQ's STOMP port) and, with --amqp HOST:PORT, for
AMQP 1.0 on the same broker core (e.g. --amqp 127.0.0.1:5690; 5672 is RabbitMQ's and the
other brokers' AMQP port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from ackspec.errors import AckspecError
from ackspec.reference.broker.acl import load_acl
from ackspec.reference.broker.auth import Authenticator, load_users
from ackspec.reference.broker.model import CoreConfig
from ackspec.reference.broker.trace import Tracer
from ackspec.reference.flow import DEFAULT_MAX_QUEUED_BYTES, ProducerFlow
from ackspec.reference.journal.log import RECOVERY_MODES
from ackspec.reference.limits import AmqpLimits
from ackspec.reference.server import BrokerServer, new_event_loop
from ackspec.reference.stomp.session import SessionConfig
from ackspec.reference.tls import server_context

log = logging.getLogger("ackspec.broker")

DEFAULT_STOMP_PORT = 61630
"""Not 61613: that is the STOMP port of ActiveMQ, Artemis and RabbitMQ, so the reference broker
would clash with (or be mistaken for) a real broker on the same machine."""


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    value = int(port)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range in {text!r}")
    return host.strip("[]"), value


def _control_token(path: str | None) -> str | None:
    """The control API token from ``path`` (None: the server generates one)."""
    if path is None:
        return None
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AckspecError(f"cannot read control token file {path}: {exc.strerror}") from None
    token = lines[0].strip() if lines else ""
    if len(token) < 16:
        raise AckspecError(f"{path}: the control token must be at least 16 characters")
    return token


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("broker", description=__doc__,
                              help="run the reference broker (STOMP 1.2 and AMQP 1.0, journal, fault injection)")
    p.add_argument("--stomp", type=_host_port, default=("127.0.0.1", DEFAULT_STOMP_PORT), metavar="HOST:PORT",
                   help=f"STOMP listener (default 127.0.0.1:{DEFAULT_STOMP_PORT}; port 0 = ephemeral)")
    p.add_argument("--amqp", type=_host_port, default=None, metavar="HOST:PORT",
                   help="AMQP 1.0 listener on the same broker core (port 0 = ephemeral)")
    p.add_argument("--ws", type=_host_port, default=None, metavar="HOST:PORT",
                   help="STOMP over WebSocket (subprotocol v12.stomp, RFC 6455) on the same core (port 0 = ephemeral)")
    p.add_argument("--data", metavar="DIR", default=None,
                   help="journal directory (persistent messages survive restarts); default: in memory")
    p.add_argument("--recover", choices=RECOVERY_MODES, default="refuse",
                   help="damage in the middle of the journal (not a torn tail, always cut): refuse to start "
                        "(default), skip-corrupt (keep every good record after it) or truncate (keep what "
                        "precedes it); either way the original is copied aside and each lost record counted")
    p.add_argument("--users", metavar="FILE", default=None,
                   help="users file, one 'login:passcode' per line; without it any login is accepted")
    p.add_argument("--acl", metavar="FILE", default=None,
                   help="per-destination permissions, one 'PATTERN read,write,admin LOGINS' rule a line "
                        "(docs/security.md); without it every client may read and write everything")
    p.add_argument("--allow-anonymous", action="store_true",
                   help="with --users: also accept connections without a login")
    p.add_argument("--tls-cert", metavar="PEM", default=None,
                   help="serve TLS with this certificate (chain): stomp+ssl://, amqps:// and wss:// (needs --tls-key)")
    p.add_argument("--tls-key", metavar="PEM", default=None, help="the private key of --tls-cert")
    p.add_argument("--no-sync-transactional", action="store_true",
                   help="confirm COMMIT before fsync (journal-sync-transactional=false)")
    p.add_argument("--no-sync-non-transactional", action="store_true",
                   help="confirm persistent SEND/ACK before fsync (journal-sync-non-transactional=false)")
    p.add_argument("--max-redeliveries", type=int, default=6, metavar="N",
                   help="redeliveries before a message goes to the dead-letter queue (default 6)")
    p.add_argument("--max-connections", type=int, default=1000, metavar="N",
                   help="open connections per protocol (default 1000)")
    p.add_argument("--max-frame", type=int, default=4 * 1024 * 1024, metavar="BYTES",
                   help="largest STOMP frame and AMQP message, and most input accepted before CONNECT "
                        "(default 4 MiB)")
    p.add_argument("--max-transactions", type=int, default=100, metavar="N",
                   help="open transactions per connection (default 100)")
    p.add_argument("--max-queued-bytes", type=int, default=DEFAULT_MAX_QUEUED_BYTES, metavar="BYTES",
                   help="stop reading from producers while the stored messages (bodies + ~400 bytes each) exceed "
                        "this, until they drop to 80%% of it (default 256 MiB; 0 = no flow control)")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="time a connection has to complete CONNECT / AMQP open (default 10; 0 = no limit)")
    p.add_argument("--idle-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="close a client that sent nothing for this long and negotiated no heart-beats "
                        "(default 600; 0 = no limit)")
    p.add_argument("--control", type=_host_port, default=None, metavar="HOST:PORT",
                   help="JSON-over-HTTP fault-injection control API (it can make the broker lose messages): off "
                        "unless given, loopback addresses only, every request needs 'Authorization: Bearer "
                        "TOKEN'; the token is read from --control-token-file, else generated and printed")
    p.add_argument("--control-token-file", metavar="FILE", default=None,
                   help="file holding the control API's token (first line)")
    p.add_argument("--trace", action="store_true", help="log the requirement ID each behaviour serves")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop",
                   help="event loop (default uvloop, asyncio's when uvloop is not installed: a receipt round trip "
                        "costs the broker about a third less CPU on uvloop; docs/benchmark.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = build_server(args)
    tls = server.tls

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await server.start()
        except OSError as exc:
            raise AckspecError(f"cannot listen on {args.stomp[0]}:{args.stomp[1]}: {exc.strerror}") from None
        log.info("STOMP listening on %s:%d (data: %s, users: %s)", server.host, server.port,
                 args.data or "in memory", args.users or "any login accepted")
        if args.users and not args.acl:
            log.warning("no --acl: every authenticated client may read, write and administer every destination")
        if not args.users:
            log.warning("ANONYMOUS ACCESS: no --users file, so ANY login and passcode is accepted and every client "
                        "may read, write and administer every destination; give --users FILE for a shared broker")
        if server.control_address is not None:
            log.info("control API on http://%s:%d", *server.control_address)
        stomp_scheme, amqp_scheme = ("stomp+ssl", "amqps") if tls is not None else ("stomp", "amqp")
        print(f"ackspec broker: {stomp_scheme}://{server.host}:{server.port}", flush=True)
        if server.amqp_address is not None:
            print(f"ackspec broker: {amqp_scheme}://{server.amqp_address[0]}:{server.amqp_address[1]}", flush=True)
        if server.ws_address is not None:
            ws_scheme = "wss" if tls is not None else "ws"
            print(f"ackspec broker: {ws_scheme}://{server.ws_address[0]}:{server.ws_address[1]}/", flush=True)
        if server.control_address is not None and not args.control_token_file:
            print(f"ackspec broker: control token {server.control_token}", flush=True)
        await stop.wait()
        log.info("stopping")
        await server.stop()
        if args.trace:
            for rid, n in sorted(server.tracer.counts.items()):
                log.info("trace %s %d", rid, n)

    tune_collector()
    loop = new_event_loop(args.loop)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            loop.run_until_complete(main())
    finally:
        loop.close()
    return 0


def build_server(args: argparse.Namespace) -> BrokerServer:
    """The server the flags describe; bad values are one :class:`AckspecError` line."""
    if args.max_redeliveries < 0:
        raise AckspecError("--max-redeliveries must be >= 0")
    for flag in ("max_frame", "max_queued_bytes", "max_transactions", "max_connections", "connect_timeout",
                 "idle_timeout"):
        if getattr(args, flag) < 0:
            raise AckspecError(f"--{flag.replace('_', '-')} must be >= 0")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise AckspecError("--tls-cert and --tls-key go together")
    tls = server_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    users = load_users(args.users) if args.users else {}
    auth = Authenticator(users, allow_anonymous=args.allow_anonymous or not args.users,
                         acl=load_acl(args.acl) if args.acl else None)
    return BrokerServer(
        host=args.stomp[0],
        port=args.stomp[1],
        data_dir=args.data,
        core_config=CoreConfig(max_redeliveries=args.max_redeliveries,
                               sync_transactional=not args.no_sync_transactional,
                               sync_non_transactional=not args.no_sync_non_transactional),
        session_config=SessionConfig(max_frame=args.max_frame, max_transactions=args.max_transactions,
                                     connect_timeout=args.connect_timeout, idle_timeout=args.idle_timeout),
        auth=auth,
        tracer=Tracer(log_hits=args.trace),
        max_connections=args.max_connections,
        control=args.control,
        amqp=args.amqp,
        ws=args.ws,
        journal_recover=args.recover,
        control_token=_control_token(args.control_token_file),
        tls=tls,
        flow=ProducerFlow(args.max_queued_bytes),
        amqp_limits=AmqpLimits(max_connections=args.max_connections, max_message_size=args.max_frame,
                               max_transactions=args.max_transactions, open_timeout=args.connect_timeout,
                               idle_timeout=args.idle_timeout),
    )


def tune_collector() -> None:
    """Collect young objects every 50,000 allocations instead of every 700, and never scan what
    start-up made (``gc.freeze``).

    A broker allocates a few short-lived objects per frame and keeps few cycles; with Python's
    default threshold the young-generation collections cost the AMQP window row 5-10 us per
    message in some repetitions (docs/benchmark.md). Cycles are still collected, only later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
