"""The client-side suite inside ``ackspec run``: ``--client NAME``, and the reference client of a plain run.

``ackspec run --client NAME`` judges a client library instead of a broker: pytest runs the
client-side suite (``ackspec.conformance.client``) with the client under test NAME (a registered
client, ``module:Class`` or ``shim:COMMAND``) against the fault-injecting reference broker (or,
with ``--broker B``, a broker that brokers/ starts, where rules needing fault injection or a
confirmation gate for the client's protocol are not applicable), and
writes the same run directory as a broker run (results.json with ``kind: client``, junit.xml,
allure-results/, the report). ``--profile`` then names a client profile (``spec/clients/``);
without it the client's bundled profile, if any, supplies the known deviations.

A plain ``ackspec run`` (the embedded broker, no ``--only`` that excludes them) also runs the
reference client through the client-side suite, into ``RUN/client-reference/``, so the
Jakarta Messaging 7.3 rules have verdicts in the default report.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from ackspec.errors import AckspecError, one_line

CLIENT_SUITE_PACKAGE = "ackspec.conformance.client"
DEFAULT_RUN_CLIENT = "reference"


def preflight_client(args: argparse.Namespace) -> None:
    """One line, before anything runs, for a client that cannot be built or a bad client profile."""
    from ackspec.conformance.client_target import UnknownClientError, check_client  # noqa: PLC0415
    from ackspec.spec import SpecError  # noqa: PLC0415
    from ackspec.spec.client_profiles import load_client_profile  # noqa: PLC0415

    if args.target:
        raise AckspecError("--client runs the client-side suite against the reference broker, or the broker "
                           "--broker names; --target is for broker runs (use one or the other)")
    if args.restart_command or args.broker_parts:
        raise AckspecError("--client does not take --restart-command or --broker-parts")
    if args.broker:
        _preflight_broker(args.broker)
    with one_line(UnknownClientError):
        check_client(args.client)
    if args.profile:
        with one_line(SpecError):
            load_client_profile(args.profile)


def export_client_broker(args: argparse.Namespace) -> None:
    """Name ``--broker`` in the environment too (``ACKSPEC_CLIENT_BROKER``), besides the pytest option: the
    client-side fixtures and any shim the run starts see the same broker as the session that credits it."""
    import os  # noqa: PLC0415

    from ackspec.conformance.client_target import CLIENT_BROKER_ENV  # noqa: PLC0415

    if args.client and args.broker:
        os.environ[CLIENT_BROKER_ENV] = args.broker


def _preflight_broker(name: str) -> None:
    """A broker of brokers/ that is up (its STOMP port answers), else one line saying how to start it."""
    from ackspec.brokers import broker  # noqa: PLC0415
    from ackspec.conformance.target import probe  # noqa: PLC0415
    from ackspec.conformance.verdicts import TargetUnavailable  # noqa: PLC0415

    info = broker(name)  # AckspecError naming the known brokers
    with one_line(TargetUnavailable, prefix=f"broker {name}: ", suffix=f" (start it: bash brokers/start.sh {name})"):
        probe(info.stomp_url)


def includes_reference_client(args: argparse.Namespace) -> bool:
    """A plain run (the embedded broker as it is, no --client) covers the reference client too."""
    return not (args.client or args.target or args.broker_parts or args.restart_command)


def wants_reference_client(args: argparse.Namespace) -> bool:
    """A plain run judges the reference client in a sub-run after the broker suite (a dry run only lists it)."""
    return includes_reference_client(args) and not args.dry_run


def client_run_dir(out: Path, client: str = DEFAULT_RUN_CLIENT) -> Path:
    """Where a plain run puts its client-side sub-run: ``RUN/client-<name>``."""
    return out / ("client-" + (re.sub(r"[^A-Za-z0-9._-]+", "_", client).strip("_") or "client"))


def client_pytest_args(args: argparse.Namespace, client: str, run_id: str, out: Path) -> list[str]:
    """pytest's arguments for one run of the client-side suite with ``client`` into ``out``."""
    argv = ["--pyargs", CLIENT_SUITE_PACKAGE, "-p", "no:cacheprovider", "-q", "--no-header",
            "--tb=short" if args.verbose else "--tb=no", "-o", "addopts=",
            f"--ackspec-run-id={run_id}", f"--ackspec-out={out}", f"--ackspec-client={client}",
            f"--junitxml={out / 'junit.xml'}", f"--alluredir={out / 'allure-results'}", "--clean-alluredir"]
    if args.client and args.profile:
        argv.append(f"--ackspec-client-profile={args.profile}")
    if args.client and args.broker:
        argv.append(f"--ackspec-client-broker={args.broker}")
    for flag, value in (("--ackspec-timeout", args.timeout), ("--ackspec-seed", args.seed),
                        ("--ackspec-examples", args.examples)):
        if value is not None:
            argv.append(f"{flag}={value}")
    argv += [f"--ackspec-only={p}" for p in args.only] + [f"--ackspec-skip={p}" for p in args.skip]
    if args.strict:
        argv.append("--ackspec-strict")
    if args.dry_run:
        argv.append("--collect-only")
    return argv


def describe(target: Any) -> str:
    """``client-side suite: stomp.py 9.0.0 over stomp against the reference broker (client profile stomp.py-9.0)``."""
    version = f" {target.version}" if target.version else ""
    broker = "the reference broker" if target.broker == "reference" else target.broker
    profile = f"client profile {target.profile}" if target.profile else "no client profile: no known deviations"
    return f"client-side suite: {target.library}{version} over {target.protocol or '?'} against {broker} ({profile})"
