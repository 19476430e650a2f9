"""``ackspec run``: run the conformance suite against a target and judge it.

    ackspec run                                    # the embedded reference broker
    ackspec run --target stomp://127.0.0.1:61614 --profile rabbitmq-3.10
    ackspec run --only 'STOMP-TX-*' --examples 200 --seed 7
    ackspec run --client stomp.py                  # a client library through the client-side suite

A plain run also runs the reference client through the client-side suite (RUN/client-reference/),
so the report has the JMS 7.3 rules; ``--client NAME`` runs that suite alone with another client
(see :mod:`ackspec.cli.client_run`).

pytest runs in-process on the packaged suite (``ackspec.conformance.suite``) with
the ackspec plugin; a progress bar shows while it runs, then a table per family
and requirement. Exit status: 0 conformant (documented deviations allowed unless
``--strict``), 1 not conformant, 2 usage or connection error (one line).

The run directory (``--out``, default ``ackspec-out/<run-id>``) gets junit.xml,
allure-results/, results.json and histories/ (layout: docs/run-directory.md),
and, unless ``--no-report``, the pipeline's report.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ackspec.errors import AckspecError
from ackspec.results import RunResults, Verdict, combine, is_failure

SUITE_PACKAGE = "ackspec.conformance.suite"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run the conformance suite against a target",
                              description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--target", metavar="URL", help="broker URL (stomp://host:port); default: embedded reference broker")
    p.add_argument("--profile", metavar="NAME",
                   help="target profile (settings and known deviations); with --client, a client profile")
    p.add_argument("--client", metavar="NAME",
                   help="judge a client library instead of a broker: a registered client (reference, reference-amqp, "
                        "stomp.py, proton, ...), module:Class or shim:COMMAND, through the client-side suite")
    p.add_argument("--only", metavar="PATTERN", action="append", default=[],
                   help="run only tests whose id or cited requirement matches (glob; repeatable)")
    p.add_argument("--skip", metavar="PATTERN", action="append", default=[],
                   help="skip tests whose id or cited requirement matches (glob; repeatable)")
    p.add_argument("--dry-run", action="store_true", help="list what would run, run nothing")
    p.add_argument("--examples", type=_positive_int, metavar="N", help="hypothesis examples per property (default 8)")
    p.add_argument("--seed", type=int, metavar="S", help="hypothesis seed (default 0: reproducible)")
    p.add_argument("--timeout", type=_positive_float, metavar="S", help="wait for a receipt/message (default 5 s)")
    p.add_argument("--strict", action="store_true", help="documented deviations also fail the run")
    p.add_argument("--out", metavar="DIR", help="run directory (default ackspec-out/<run-id>)")
    p.add_argument("--no-report", action="store_true", help="do not build the traceability report at the end")
    p.add_argument("--restart-command", metavar="CMD",
                   help="shell command that restarts a real target keeping its messages (e.g. 'bash brokers/restart.sh "
                        "artemis'): the broker-restart tests then run against it")
    p.add_argument("--fault", metavar="MUTANT", help=argparse.SUPPRESS)  # quality checks: mutant reference broker
    p.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output")
    p.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _preflight(args: argparse.Namespace) -> None:
    """Fail fast, in one line, on a bad profile or an unreachable target (or a client that cannot be built)."""
    from ackspec.adapters.registry import UnknownScheme, factory_for  # noqa: PLC0415
    from ackspec.cli.client_run import preflight_client  # noqa: PLC0415
    from ackspec.conformance.target import ProfileError, load_profile, probe  # noqa: PLC0415
    from ackspec.conformance.verdicts import TargetUnavailable  # noqa: PLC0415

    if args.client:
        preflight_client(args)
        return
    if args.profile:
        try:
            load_profile(args.profile)
        except ProfileError as exc:
            raise AckspecError(str(exc)) from exc
    if args.target:
        try:
            factory_for(args.target)
        except UnknownScheme as exc:
            raise AckspecError(str(exc)) from exc
        try:
            probe(args.target)
        except TargetUnavailable as exc:
            raise AckspecError(str(exc)) from exc


def pytest_args(args: argparse.Namespace, run_id: str, out: Path) -> list[str]:
    argv = ["--pyargs", SUITE_PACKAGE, "-p", "no:cacheprovider", "-q", "--no-header",
            "--tb=short" if args.verbose else "--tb=no", "-o", "addopts=",
            f"--ackspec-run-id={run_id}", f"--ackspec-out={out}",
            f"--junitxml={out / 'junit.xml'}", f"--alluredir={out / 'allure-results'}", "--clean-alluredir"]
    for flag, value in (("--ackspec-target", args.target), ("--ackspec-profile", args.profile),
                        ("--ackspec-examples", args.examples), ("--ackspec-seed", args.seed),
                        ("--ackspec-timeout", args.timeout), ("--ackspec-fault", args.fault),
                        ("--ackspec-restart-command", args.restart_command)):
        if value is not None:
            argv.append(f"{flag}={value}")
    argv += [f"--ackspec-only={p}" for p in args.only] + [f"--ackspec-skip={p}" for p in args.skip]
    if args.strict:
        argv.append("--ackspec-strict")
    if args.dry_run:
        argv.append("--collect-only")
    return argv


class _Progress:
    """A pytest plugin driving a rich progress bar."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.task: Any = None
        self.collected: list[tuple[str, list[str]]] = []

    def pytest_collection_finish(self, session: Any) -> None:
        from ackspec.conformance.session import requirements_of  # noqa: PLC0415

        self.collected = [(item.nodeid, requirements_of(item)) for item in session.items]
        self.task = self.progress.add_task("conformance", total=len(session.items))

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        if self.task is not None:
            self.progress.update(self.task, advance=1, description=nodeid.rsplit("::", maxsplit=1)[-1][:48])


def _pytest_pass(argv: list[str], args: argparse.Namespace, console: Any) -> tuple[int, _Progress, str]:
    """One pytest run of a suite under the progress bar: its exit code, the progress plugin, its output."""
    import pytest  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

    progress = Progress(TextColumn("[bold]{task.description:<48}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=True, disable=args.dry_run)
    plugin = _Progress(progress)
    sink = io.StringIO()
    with progress:
        redirect = contextlib.nullcontext() if args.verbose else contextlib.redirect_stdout(sink)
        with redirect:
            code = pytest.main(argv, plugins=[plugin])
    return int(code), plugin, sink.getvalue()


def run(args: argparse.Namespace) -> int:
    import pytest  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415

    from ackspec.cli.client_run import (  # noqa: PLC0415
        DEFAULT_RUN_CLIENT,
        client_pytest_args,
        client_run_dir,
        describe,
        includes_reference_client,
        wants_reference_client,
    )
    from ackspec.conformance.session import new_run_id  # noqa: PLC0415

    _preflight(args)
    run_id = new_run_id()
    out = Path(args.out) if args.out else Path("ackspec-out") / run_id
    if out.exists() and (out / "results.json").exists():
        raise AckspecError(f"{out}: already holds a run (results.json); choose another --out")
    console = Console(stderr=False)
    argv = client_pytest_args(args, args.client, run_id, out) if args.client else pytest_args(args, run_id, out)
    started = time.monotonic()
    code, plugin, output = _pytest_pass(argv, args, console)
    if includes_reference_client(args) and code == pytest.ExitCode.NO_TESTS_COLLECTED:
        args.client = DEFAULT_RUN_CLIENT  # --only chose client-side rules alone: the reference client's run is the run
        code, plugin, output = _pytest_pass(client_pytest_args(args, args.client, run_id, out), args, console)
    elif includes_reference_client(args) and args.dry_run:
        client_argv = client_pytest_args(args, DEFAULT_RUN_CLIENT, run_id, client_run_dir(out))
        plugin.collected += _pytest_pass(client_argv, args, console)[1].collected
    elapsed = time.monotonic() - started
    if args.dry_run:
        for nodeid, reqs in plugin.collected:
            console.print(f"{nodeid}  [dim]{', '.join(reqs)}[/dim]")
        console.print(f"{len(plugin.collected)} tests would run")
        return 0 if code in (0, 5) else 2
    results_path = out / "results.json"
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR) or not results_path.exists():
        detail = _last_line(output) or f"pytest exited with {int(code)}"
        raise AckspecError(f"the suite could not run: {detail}")
    results = RunResults.read(results_path)
    if results.target.is_client:
        console.print(describe(results.target))
        if results.extra.get("client_version_note"):
            console.print(f"[yellow]{results.extra['client_version_note']}[/]")
    _print_table(console, results)
    _note_unexercised(console, results)
    bad = [t for t in results.tests if is_failure(t.verdict, strict=args.strict)]
    errors = [t for t in results.tests if t.verdict is Verdict.ERROR]
    if wants_reference_client(args):
        client = _reference_client_pass(args, out, console)
        if client is not None:
            bad += [t for t in client[1].tests if is_failure(t.verdict, strict=args.strict)]
            console.print(f"client-side run {client[1].run_id}: {len(client[1].tests)} verdicts -> {client[0]}")
    failing_cells = 0 if args.no_report else _report(console, out)
    console.print(f"run {results.run_id}: {len(results.tests)} verdicts in {elapsed:.1f}s -> {out}")
    if errors and len(errors) == len(results.tests):
        raise AckspecError(f"every check errored: {errors[0].message.splitlines()[0] if errors[0].message else ''}")
    if failing_cells and not bad:
        console.print(f"[red]the history check failed {failing_cells} requirement cell(s) that no test failed "
                      f"(e.g. a confirmed message never delivered): see {out / 'report'}[/]")
    return 1 if bad or failing_cells else 0


def _reference_client_pass(args: argparse.Namespace, out: Path, console: Any) -> tuple[Path, RunResults] | None:
    """The reference client through the client-side suite, into RUN/client-reference; None when the run's
    --only/--skip leave no client-side test (or the pass could not run: said in one line)."""
    from ackspec.cli.client_run import DEFAULT_RUN_CLIENT, client_pytest_args, client_run_dir, describe  # noqa: PLC0415
    from ackspec.conformance.session import new_run_id  # noqa: PLC0415

    client_out = client_run_dir(out)
    code, _, output = _pytest_pass(client_pytest_args(args, DEFAULT_RUN_CLIENT, new_run_id(), client_out),
                                   args, console)
    if not (client_out / "results.json").is_file():
        if code != 5:  # 5: no client-side test selected
            console.print(f"[red]the client-side suite could not run: {_last_line(output) or code}[/]")
        return None
    results = RunResults.read(client_out / "results.json")
    console.print(describe(results.target))
    _print_table(console, results)
    return client_out, results


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("=")]
    for ln in reversed(lines):
        if "error" in ln.lower():
            return ln
    return lines[-1] if lines else ""


def family_of(requirement: str) -> str:
    parts = requirement.split("-")
    return parts[0] if len(parts) < 2 else f"{parts[0]}-{parts[1]}" if parts[1][:1].isdigit() else parts[0]


def _print_table(console: Any, results: RunResults) -> None:
    from rich.table import Table  # noqa: PLC0415

    by_req: dict[str, list[Verdict]] = defaultdict(list)
    levels: dict[str, str] = {}
    messages: dict[str, str] = {}
    for t in results.tests:
        by_req[t.requirement].append(t.verdict)
        levels[t.requirement] = t.level or ""
        notable = t.verdict in (Verdict.FAIL, Verdict.STALE, Verdict.ERROR, Verdict.DEVIATION)
        if notable and t.requirement not in messages:
            messages[t.requirement] = (t.message or "").splitlines()[0][:90] if t.message else ""
    families: dict[str, list[str]] = defaultdict(list)
    for req in sorted(by_req):
        families[family_of(req)].append(req)
    style = {Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.STALE: "red", Verdict.ERROR: "magenta",
             Verdict.DEVIATION: "yellow", Verdict.INDETERMINATE: "cyan", Verdict.NOT_APPLICABLE: "dim"}
    totals: dict[Verdict, int] = defaultdict(int)
    for family, reqs in families.items():
        table = Table(title=f"{family}", title_justify="left", show_lines=False)
        table.add_column("requirement")
        table.add_column("level")
        table.add_column("verdict")
        table.add_column("tests", justify="right")
        table.add_column("detail", overflow="fold")
        for req in reqs:
            verdict = combine(by_req[req])
            totals[verdict] += 1
            table.add_row(req, levels[req], f"[{style[verdict]}]{verdict}[/]", str(len(by_req[req])),
                          messages.get(req, ""))
        console.print(table)
    summary = ", ".join(f"[{style[v]}]{n} {v}[/]" for v, n in sorted(totals.items(), key=lambda kv: kv[0].value))
    must = sorted({r for r in by_req if combine(by_req[r]) is Verdict.FAIL and levels[r].startswith("MUST")})
    should = sorted({r for r in by_req if combine(by_req[r]) is Verdict.FAIL and not levels[r].startswith("MUST")})
    console.print(f"requirements: {summary}")
    if must:
        console.print(f"[bold red]MUST failures ({len(must)}):[/] {', '.join(must)}")
    if should:
        console.print(f"[red]SHOULD/other failures ({len(should)}):[/] {', '.join(should)}")


def unexercised_deviations(results: RunResults) -> list[str]:
    """Deviations of the run's profile that no test of this run showed, confirmed stale or ran at all.

    A documented deviation whose requirement was only not-applicable (or not run) is not evidence
    either way: listed so that profiles do not keep deviations no run can confirm.
    """
    from ackspec.conformance.target import ProfileError, deviations_of, load_profile  # noqa: PLC0415

    name = results.target.profile
    if not name:
        return []
    shown = {t.requirement for t in results.tests
             if t.verdict in (Verdict.DEVIATION, Verdict.STALE)
             or (t.verdict is Verdict.PASS and (t.message or "").startswith("intermittent deviation"))}
    if results.target.is_client:
        from ackspec.conformance.client_target import client_deviations  # noqa: PLC0415

        return sorted(set(client_deviations(name, results.target.broker)) - shown)
    try:
        deviations = deviations_of(load_profile(name))
    except ProfileError:
        return []
    protocol = results.target.protocol or ""
    return sorted({d.requirement for d in deviations
                   if d.requirement not in shown and (not d.protocols or not protocol or protocol in d.protocols)})


def _note_unexercised(console: Any, results: RunResults) -> None:
    missing = unexercised_deviations(results)
    if missing:
        console.print(f"[yellow]profile deviations this run did not exercise ({len(missing)}):[/] {', '.join(missing)}")


def _report(console: Any, out: Path) -> int:
    """Build the run's report (over its results and its sub-runs', e.g. the client-side run); return how
    many requirement cells it fails (0 when not built).

    The report also judges the histories (loss, duplicates, order, window bounds), so a cell can
    fail there although every test passed: a run is only clean when its report is."""
    import importlib  # noqa: PLC0415

    try:
        build_report = importlib.import_module("ackspec.pipeline.report").build_report
    except (ImportError, AttributeError):
        return 0  # the pipeline is not installed
    console.print("building the report ...")
    try:
        summary = build_report([out], out / "report")
    except AckspecError as exc:
        console.print(f"[yellow]report not built: {exc}[/]")
        return 0
    return int(summary.failing_cells)
