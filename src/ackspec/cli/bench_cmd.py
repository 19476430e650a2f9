"""``ackspec bench [--targets T,...] [--messages N] [--repetitions R] [--out DIR]``.

Throughput (msg/s) of each scenario against each target on loopback, the median of R runs, with the
ratio of the reference broker to the faster of RabbitMQ/ActiveMQ. Real brokers must already be
running (brokers/start.sh NAME); the reference broker is started for the run.

``--paired BLOCK --targets A,B`` compares two targets instead: connections to both stay open, each
scenario runs in alternating blocks of BLOCK messages (a quarter on the persistent rows; A then B,
B then A, ...), every pair gives the
ratio A/B, and the report gives the median ratio, the order statistics that bracket it at 95% or more,
and a verdict: "parity shown" (interval's low end >= 1), "behind" (high end < 1) or "not resolved".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ackspec.bench.paired import format_paired, run_paired, write_paired
from ackspec.bench.report import format_table, write_outputs
from ackspec.bench.runner import run_bench
from ackspec.bench.scenarios import SCENARIOS, Scenario
from ackspec.bench.targets import parse_targets
from ackspec.errors import AckspecError

DEFAULT_TARGETS = "reference,rabbitmq,activemq,artemis,activemq6"
PAIRED_TARGETS = "reference,activemq"


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
    parser.add_argument("--scenarios",
                        help="comma-separated subset of: " + ", ".join(s.name for s in SCENARIOS)
                             + " (default: all; with --paired: those with a session, "
                             + ", ".join(s.name for s in SCENARIOS if s.session) + ")")
    parser.add_argument("--paired", type=_positive, metavar="BLOCK",
                        help="compare two targets (--targets A,B; default " + PAIRED_TARGETS + ") in alternating "
                             "blocks of BLOCK messages (a quarter on the persistent rows) on open connections; "
                             "short blocks slow a JVM broker that idled during the other's block: use blocks of "
                             "a second or more (e.g. 4000); reports the median of the per-pair "
                             "ratios A/B, its 95%% distribution-free interval and a verdict (parity shown: low "
                             "end >= 1; behind: high end < 1; else not resolved)")
    parser.add_argument("--pairs", type=_positive, default=20,
                        help="pairs of blocks per scenario with --paired (default 20; 6 at least for an interval)")
    parser.add_argument("--out", type=Path, default=Path("ackspec-out/bench"), help="where bench.json/.txt/.png go")
    parser.add_argument("--protocol", choices=("stomp", "amqp"), default="stomp",
                        help="amqp: the AMQP 1.0 rows (reference, rabbitmq, artemis, activemq6)")
    parser.set_defaults(func=run)


def _scenarios(text: str | None, paired: bool) -> list[Scenario]:
    if text is None:
        return [s for s in SCENARIOS if s.session or not paired]
    by_name = {s.name: s for s in SCENARIOS}
    wanted = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_name]
    if unknown or not wanted:
        raise AckspecError(f"bench: unknown scenario {', '.join(unknown) or '(none)'} (known: {', '.join(by_name)})")
    return [by_name[name] for name in wanted]


def run(args: argparse.Namespace) -> int:
    if args.protocol == "amqp":
        from ackspec.bench.amqp import run_cli  # noqa: PLC0415

        targets = None if args.targets == DEFAULT_TARGETS else args.targets
        return run_cli(targets, args.messages, args.repetitions, args.body_bytes)
    if args.paired is not None:
        return run_paired_cli(args)
    targets = parse_targets(args.targets)
    result = run_bench(targets, messages=args.messages, repetitions=args.repetitions, body_bytes=args.body_bytes,
                       scenarios=_scenarios(args.scenarios, paired=False))
    print(format_table(result))
    written = write_outputs(result, args.out)
    print("wrote " + ", ".join(str(path) for path in written))
    failed = [c for c in result.cells.values() if c.error]
    return 1 if failed and len(failed) == len(result.cells) else 0


def run_paired_cli(args: argparse.Namespace) -> int:
    targets = parse_targets(PAIRED_TARGETS if args.targets == DEFAULT_TARGETS else args.targets)
    result = run_paired(targets, _scenarios(args.scenarios, paired=True), block=args.paired, pairs=args.pairs,
                        body_bytes=args.body_bytes, progress=_stderr)
    print(format_paired(result))
    written = write_paired(result, args.out)
    print("wrote " + ", ".join(str(path) for path in written))
    return 1 if all(row.error for row in result.rows) else 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
