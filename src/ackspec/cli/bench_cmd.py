"""``ackspec bench [--targets T,...] [--messages N] [--repetitions R] [--out DIR]``.

Throughput (msg/s) of each scenario against each target on loopback, the median of R runs, with the
ratio of the reference broker to the faster of RabbitMQ/ActiveMQ. Real brokers must already be
running (brokers/start.sh NAME); the reference broker is started for the run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ackspec.bench.report import format_table, write_outputs
from ackspec.bench.runner import run_bench
from ackspec.bench.scenarios import SCENARIOS
from ackspec.bench.targets import parse_targets
from ackspec.errors import AckspecError

DEFAULT_TARGETS = "reference,rabbitmq,activemq,artemis,activemq6"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="throughput: reference broker vs real brokers (STOMP, loopback)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--targets", default=DEFAULT_TARGETS,
                        help=f"comma-separated: reference, real broker names, or LABEL=stomp://127.0.0.1:PORT "
                             f"(default: {DEFAULT_TARGETS})")
    parser.add_argument("--messages", type=_positive, default=10000,
                        help="messages per scenario run (persistent rows use a quarter; default 10000)")
    parser.add_argument("--repetitions", type=_positive, default=3, help="runs per cell; the median is reported")
    parser.add_argument("--body-bytes", type=_positive, default=100, help="message body size (default 100)")
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS),
                        help="comma-separated subset of: " + ", ".join(s.name for s in SCENARIOS))
    parser.add_argument("--out", type=Path, default=Path("ackspec-out/bench"), help="where bench.json/.txt/.png go")
    parser.add_argument("--protocol", choices=("stomp", "amqp"), default="stomp",
                        help="amqp: the AMQP 1.0 rows (reference, rabbitmq, artemis, activemq6)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.protocol == "amqp":
        from ackspec.bench.amqp import run_cli  # noqa: PLC0415

        targets = None if args.targets == DEFAULT_TARGETS else args.targets
        return run_cli(targets, args.messages, args.repetitions, args.body_bytes)
    targets = parse_targets(args.targets)
    by_name = {s.name: s for s in SCENARIOS}
    wanted = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_name]
    if unknown or not wanted:
        raise AckspecError(f"bench: unknown scenario {', '.join(unknown) or '(none)'} (known: {', '.join(by_name)})")
    result = run_bench(targets, messages=args.messages, repetitions=args.repetitions, body_bytes=args.body_bytes,
                       scenarios=[by_name[name] for name in wanted])
    print(format_table(result))
    written = write_outputs(result, args.out)
    print("wrote " + ", ".join(str(path) for path in written))
    failed = [c for c in result.cells.values() if c.error]
    return 1 if failed and len(failed) == len(result.cells) else 0
