"""``ackspec brokers install|start|stop|status [NAME...]``: real brokers on loopback.

A thin front to the repository's ``brokers/*.sh`` scripts (see brokers/README.md).
"""

from __future__ import annotations

import argparse

from ackspec import brokers


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "brokers",
        help="install, start, stop real brokers (RabbitMQ, ActiveMQ 5/6, Artemis) on loopback",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("action", choices=("install", "start", "stop", "status", "ports"))
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of: {', '.join(brokers.BROKERS)} (default: all)")
    parser.add_argument("--fresh", action="store_true", help="start: delete stored messages and configuration first")
    parser.set_defaults(func=run)


def _ports_table(names: list[str]) -> str:
    lines = [f"{'NAME':<10} {'STOMP':<22} {'AMQP':<22} OTHER"]
    for name in names:
        info = brokers.broker(name)
        other = ", ".join(f"{label} {port}" for label, port in info.other_ports)
        lines.append(f"{name:<10} {info.stomp_url:<22} {info.amqp_url or '-':<22} {other}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    names: list[str] = list(args.names) or list(brokers.BROKERS)
    for name in names:
        brokers.broker(name)
    if args.action == "install":
        brokers.install(*args.names)
    elif args.action == "start":
        for name in names:
            brokers.start(name, fresh=args.fresh)
    elif args.action == "stop":
        brokers.stop(*names)
    elif args.action == "status":
        print(brokers.status(*names), end="")
    else:
        print(_ports_table(names))
    return 0
