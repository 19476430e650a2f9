"""ackspec run: run the conformance suite against a target and judge it.

    ackspec run                                    # the reference broker, over STOMP and over AMQP 1.0
    ackspec run --target reference+amqp://embedded # the reference broker over AMQP 1.0 only
    ackspec run --target stomp://127.0.0.1:61614 --profile rabbitmq-3.10
    ackspec run --only 'STOMP-TX-*' --examples 200 --seed 7
    ackspec run --client stomp.py                  # a client library through the client-side suite

pytest runs in-process on the packaged suite (ackspec.conformance.suite) with the
ackspec plugin, once per target: with no --target, the embedded reference broker
over STOMP and over AMQP 1.0, two targets named "reference (STOMP)" and
"reference (AMQP 1.0)", and the reference client through the client-side suite
(ackspec.cli.client_run; --client NAME runs that suite alone with another client).
While it runs, a live display (terminal) or one line per finished test (anything
else); then a table per family and requirement.
Exit status: 0 conformant (documented deviations allowed unless --strict),
1 not conformant, 2 usage or connection error (one line), 130 interrupted (Ctrl-C:
the partial results are marked interrupted, never conformant).

The run directory (--out, default ackspec-out/<run-id>) gets junit.xml,
allure-results/, results.json and histories/ (layout: docs/run-directory.md),
and, unless --no-report, the pipeline's report in report/. With several targets it
holds one run directory per target (reference-stomp/, reference-amqp/,
client-reference/) and the report over all of them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ackspec.cli.interruption import INTERRUPTED_EXIT, InterruptWatch
from ackspec.cli.progress import LiveProgress
from ackspec.cli.run_table import family_of, print_table
from ackspec.errors import AckspecError, one_line
from ackspec.results import RunResults, TargetInfo, Verdict, is_failure
from ackspec.results.model import protocol_of_url

SUITE_PACKAGE = "ackspec.conformance.suite"
EMBEDDED_TARGETS = (("reference://embedded", "reference-stomp"), ("reference+amqp://embedded", "reference-amqp"))
"""The default run: the embedded reference broker over each protocol, and the run directory of each."""

__all__ = ["family_of", "pytest_args", "register", "run", "unexercised_deviations"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run the conformance suite against a target",
                              description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--target", metavar="URL",
                   help="broker URL (stomp://host:port, amqp://host:port); default: the embedded reference broker "
                        "over both protocols (reference://embedded for STOMP only, reference+amqp://embedded for "
                        "AMQP 1.0 only)")
    p.add_argument("--profile", metavar="NAME",
                   help="target profile (settings and known deviations); with --client, a client profile")
    p.add_argument("--client", metavar="NAME",
                   help="judge a client library instead of a broker: a registered client (reference, reference-amqp, "
                        "stomp.py, proton, ...), module:Class or shim:COMMAND, through the client-side suite")
    p.add_argument("--broker", metavar="NAME",
                   help="with --client: drive the client against this broker of brokers/ (rabbitmq, activemq, artemis, "
                        "activemq6) instead of the embedded reference broker")
    p.add_argument("--only", metavar="PATTERN", action="append", default=[],
                   help="run only tests whose id or cited requirement matches (glob; repeatable)")
    p.add_argument("--skip", metavar="PATTERN", action="append", default=[],
                   help="skip tests whose id or cited requirement matches (glob; repeatable)")
    p.add_argument("--dry-run", action="store_true", help="list what would run, run nothing")
    p.add_argument("--examples", type=_positive_int, metavar="N", help="hypothesis examples per property (default 8)")
    p.add_argument("--seed", type=int, metavar="S", help="hypothesis seed (default 0: reproducible)")
    p.add_argument("--timeout", type=_positive_float, metavar="S", help="wait for a receipt/message (default 5 s)")
    p.add_argument("--shrink", action="store_true",
                   help="shrink a failing property-based example to a minimal one (can take minutes against a broker "
                        "that withholds frames); default: report the first failing example, unshrunk, with the seed")
    p.add_argument("--strict", action="store_true", help="documented deviations also fail the run")
    p.add_argument("--out", metavar="DIR", help="run directory (default ackspec-out/<run-id>)")
    p.add_argument("--no-report", action="store_true", help="do not build the traceability report at the end")
    p.add_argument("--restart-command", metavar="CMD",
                   help="shell command that restarts a real target keeping its messages (e.g. 'bash brokers/restart.sh "
                        "artemis'): the broker-restart tests then run against it")
    # the suite's quality checks: the embedded broker built from other parts (tests.quality.mutants:MUTANT)
    p.add_argument("--broker-parts", metavar="MODULE:NAME", help=argparse.SUPPRESS)
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


@dataclass(frozen=True, slots=True)
class PlannedTarget:
    """One target of a run: what pytest is pointed at, where its run directory goes, its one name."""

    url: str | None
    profile: str | None
    out: Path
    label: str
    client: str | None = None  # a client library judged through the client-side suite (not a broker)
    optional: bool = False  # part of a plain run only as far as --only/--skip leave it tests


@dataclass(slots=True)
class TargetRun:
    """How one target's pytest run ended."""

    target: PlannedTarget
    results: RunResults | None
    seconds: float
    ran: int = 0
    total: int = 0


def plan_targets(args: argparse.Namespace, run_id: str) -> tuple[Path, list[PlannedTarget]]:
    """The run's folder and its targets: the given ``--target``, else the reference broker over each protocol."""
    from ackspec.cli.client_run import DEFAULT_RUN_CLIENT, client_run_dir, includes_reference_client  # noqa: PLC0415

    root = Path(args.out) if args.out else Path("ackspec-out") / run_id
    if args.client:
        return root, [PlannedTarget(None, args.profile, root, f"client {args.client}", client=args.client)]
    if args.target:
        return root, [PlannedTarget(args.target, args.profile, root, target_label(args.target, args.profile))]
    profile = args.profile or "reference"
    targets = [PlannedTarget(url, profile, root / folder, target_label(url, profile))
               for url, folder in EMBEDDED_TARGETS]
    if includes_reference_client(args):
        targets.append(PlannedTarget(None, None, client_run_dir(root), f"client {DEFAULT_RUN_CLIENT}",
                                     client=DEFAULT_RUN_CLIENT, optional=True))
    return root, targets


def target_label(url: str, profile: str | None) -> str:
    """The name the results will give the target (``reference (STOMP)``), known before it runs."""
    embedded = url.startswith(("reference", "embedded"))
    return TargetInfo(url, profile or ("reference" if embedded else None), protocol_of_url(url)).label


def _preflight(args: argparse.Namespace) -> None:
    """Fail fast, in one line, on a bad profile or an unreachable target (or a client that cannot be built)."""
    from ackspec.adapters.registry import UnknownScheme, factory_for  # noqa: PLC0415
    from ackspec.cli.client_run import export_client_broker, preflight_client  # noqa: PLC0415
    from ackspec.conformance.target import ProfileError, load_profile, probe  # noqa: PLC0415
    from ackspec.conformance.verdicts import TargetUnavailable  # noqa: PLC0415

    if args.client:
        preflight_client(args)
        export_client_broker(args)
        return
    if args.broker:
        raise AckspecError("--broker names the broker a client runs against: use it with --client "
                           "(a broker's own run is --target URL --profile NAME)")
    if args.profile:
        with one_line(ProfileError):
            load_profile(args.profile)
    if args.target:
        with one_line(UnknownScheme, TargetUnavailable):
            factory_for(args.target)
            probe(args.target)


def pytest_args(args: argparse.Namespace, run_id: str, out: Path, target: PlannedTarget | None = None) -> list[str]:
    """pytest's command line for one target (a dry run writes nothing: no JUnit, no allure results)."""
    if target is not None and target.client is not None:
        return _client_args(args, target.client, run_id, out)
    url = target.url if target is not None else args.target
    profile = target.profile if target is not None else args.profile
    argv = ["--pyargs", SUITE_PACKAGE, "-p", "no:cacheprovider", "-q", "--no-header",
            "--tb=short" if args.verbose else "--tb=no", "-o", "addopts=",
            f"--ackspec-run-id={run_id}", f"--ackspec-out={out}"]
    if not args.dry_run:
        argv += [f"--junitxml={out / 'junit.xml'}", f"--alluredir={out / 'allure-results'}", "--clean-alluredir"]
    for flag, value in (("--ackspec-target", url), ("--ackspec-profile", profile),
                        ("--ackspec-examples", args.examples), ("--ackspec-seed", args.seed),
                        ("--ackspec-timeout", args.timeout), ("--ackspec-broker-parts", args.broker_parts),
                        ("--ackspec-restart-command", args.restart_command)):
        if value is not None:
            argv.append(f"{flag}={value}")
    argv += [f"--ackspec-only={p}" for p in args.only] + [f"--ackspec-skip={p}" for p in args.skip]
    for flag, on in (("--ackspec-strict", args.strict), ("--ackspec-shrink", getattr(args, "shrink", False)),
                     ("--collect-only", args.dry_run)):
        if on:
            argv.append(flag)
    return argv


def _client_args(args: argparse.Namespace, client: str, run_id: str, out: Path) -> list[str]:
    from ackspec.cli.client_run import client_pytest_args  # noqa: PLC0415

    argv = client_pytest_args(args, client, run_id, out)
    if args.dry_run:  # a dry run writes nothing
        argv = [a for a in argv if not a.startswith(("--junitxml=", "--alluredir=", "--clean-alluredir"))]
    return argv


def run(args: argparse.Namespace) -> int:
    from ackspec.conformance.session import new_run_id  # noqa: PLC0415

    _preflight(args)
    root, targets = plan_targets(args, new_run_id())
    if args.dry_run:
        return _dry_run(args, targets)
    created = _prepare_out(root, targets)
    stderr = sys.stderr  # the user's, whatever pytest or a display does to sys.stderr while the suite runs
    watch = InterruptWatch()
    with watch:  # to the end: a Ctrl-C while the tables print or the report builds is one line too
        try:
            runs, current = _run_targets(args, targets, watch)
        except AckspecError:
            _remove(created)  # a run that could not run leaves no run directory (no phantom report column)
            raise
        if watch.interrupted:
            return _interrupted(targets, runs, current, root, created, stderr)
        ran = [r for r in runs if r.results is not None]
        for left in (r.target.out for r in runs if r.results is None and r.target.out != root):
            shutil.rmtree(left, ignore_errors=True)  # a target --only left no test: no phantom run directory
        if not ran:
            _remove(created)
            raise AckspecError(_no_match(args))
        try:
            return _judge(args, root, ran)
        except KeyboardInterrupt:
            return _interrupted_judging(root, stderr)


def _run_targets(args: argparse.Namespace, targets: Sequence[PlannedTarget],
                 watch: InterruptWatch) -> tuple[list[TargetRun], PlannedTarget | None]:
    """Each target's pytest run in turn, until a Ctrl-C; the runs and the target the last one began."""
    from ackspec.conformance.session import new_run_id  # noqa: PLC0415

    runs: list[TargetRun] = []
    current: PlannedTarget | None = None
    try:
        for target in targets:
            current = target
            runs.append(_run_target(args, target, new_run_id(), watch))
            if watch.interrupted:
                break
    except KeyboardInterrupt:  # outside pytest: between two targets, or while one's results are read
        watch.interrupted = True
    return runs, current


def _remove(created: Path | None) -> None:
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)


def _prepare_out(root: Path, targets: Sequence[PlannedTarget]) -> Path | None:
    """Create the run's folder (one line if it cannot be written); return the topmost folder this run
    created (None: it existed), so a run that never ran can remove what it made."""
    for target in targets:
        if (target.out / "results.json").exists():
            raise AckspecError(f"{target.out}: already holds a run (results.json); choose another --out")
    absolute = root.absolute()
    missing = [folder for folder in (absolute, *absolute.parents) if not folder.exists()]
    created = missing[-1] if missing else None
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / ".ackspec-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise AckspecError(f"cannot write the run directory {root}: {exc.strerror or exc}") from exc
    return created


def _run_target(args: argparse.Namespace, target: PlannedTarget, run_id: str, watch: InterruptWatch) -> TargetRun:
    """One pytest run over the suite; its output captured, the live display on the real stdout."""
    import pytest  # noqa: PLC0415

    stream = sys.stdout
    progress = LiveProgress(stream, target.label, live=stream.isatty() and not args.verbose)
    sink = io.StringIO()
    started = time.monotonic()
    code: int = pytest.ExitCode.INTERRUPTED
    try:
        with contextlib.nullcontext() if args.verbose else _captured(sink):
            code = pytest.main(pytest_args(args, run_id, target.out, target),
                               plugins=[] if args.verbose else [progress])
    except KeyboardInterrupt:
        watch.interrupted = True
    finally:
        progress.stop()
    elapsed = time.monotonic() - started
    results_path = target.out / "results.json"
    results = RunResults.read(results_path) if results_path.exists() else None
    if watch.interrupted:  # marked by the caller, which knows which target's results are the last
        return TargetRun(target, results, elapsed, progress.done, progress.total)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED and results is None and (args.only or args.skip):
        return TargetRun(target, None, elapsed)  # --only/--skip leave this target no test
    if results is None or code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        detail = _could_not_run(args, code, sink.getvalue())
        if target.optional:
            print(f"ackspec: {target.label}: {detail}", file=sys.stderr)
            return TargetRun(target, None, elapsed)
        raise AckspecError(detail)
    return TargetRun(target, results, elapsed, progress.done, progress.total)


@contextlib.contextmanager
def _captured(sink: io.StringIO) -> Iterator[None]:
    """pytest's own output, both streams (a Ctrl-C in its clean-up prints a traceback on stderr), into
    ``sink``: the user sees the live display, the table and one line per error instead."""
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def _mark_interrupted(results: RunResults, path: Path) -> RunResults:
    """The partial results, marked interrupted even if the Ctrl-C came where pytest did not see it."""
    if results.interrupted:
        return results
    marked = dataclasses.replace(results, interrupted=True)
    marked.write(path)
    return marked


def _no_match(args: argparse.Namespace) -> str:
    chosen = " ".join([*(f"--only {p!r}" for p in args.only), *(f"--skip {p!r}" for p in args.skip)])
    return f"no test or requirement matches {chosen} (see 'ackspec spec list' and 'ackspec run --dry-run')"


def _could_not_run(args: argparse.Namespace, code: int, output: str) -> str:
    import pytest  # noqa: PLC0415

    if code == pytest.ExitCode.NO_TESTS_COLLECTED and (args.only or args.skip):
        return _no_match(args)
    detail = _last_line(output) or f"pytest exited with {int(code)}"
    return f"the suite could not run: {detail}"


def _dry_run(args: argparse.Namespace, targets: Sequence[PlannedTarget]) -> int:
    """List what would run, per target; write nothing."""
    import pytest  # noqa: PLC0415

    from ackspec.conformance.session import new_run_id  # noqa: PLC0415

    listed = 0
    for target in targets:
        progress = LiveProgress(sys.stdout, target.label, live=False)
        sink = io.StringIO()
        with _captured(sink):
            code = pytest.main(pytest_args(args, new_run_id(), target.out, target), plugins=[progress])
        if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            raise AckspecError(_could_not_run(args, code, sink.getvalue()))
        for nodeid, requirements in progress.collected:
            print(f"{target.label}  {nodeid}  {', '.join(requirements)}")
        print(f"{target.label}: {len(progress.collected)} tests would run")
        listed += len(progress.collected)
    if not listed and (args.only or args.skip):
        raise AckspecError(_no_match(args))
    return 0


def _interrupted(targets: Sequence[PlannedTarget], runs: Sequence[TargetRun], current: PlannedTarget | None,
                 root: Path, created: Path | None, stderr: TextIO) -> int:
    """One line, exit 130. The targets that wrote results keep them and the last of them is marked
    interrupted (the Ctrl-C came in it or before the next one finished a test), so the report says
    partial; a target that wrote none leaves no folder; a run with no result leaves nothing.

    What finished is read from the run directories, not from ``runs``: the Ctrl-C may have come
    after a target wrote its results but before its run was counted."""
    finished = [t for t in targets if (t.out / "results.json").exists()]
    for target in targets:
        if target not in finished and target.out != root:
            shutil.rmtree(target.out, ignore_errors=True)
    if not finished:
        _remove(created)
        print("ackspec: interrupted before any test finished; nothing written", file=stderr, flush=True)
        return INTERRUPTED_EXIT
    last = finished[-1]
    results = _mark_interrupted(RunResults.read(last.out / "results.json"), last.out / "results.json")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(AckspecError, OSError):
        _build_report([t.out for t in finished], root)
    print(f"ackspec: interrupted {_where(last, results, runs, current)}: partial results, marked interrupted "
          f"(not conformant), in {root}", file=stderr, flush=True)
    return INTERRUPTED_EXIT


def _where(last: PlannedTarget, results: RunResults, runs: Sequence[TargetRun], current: PlannedTarget | None) -> str:
    """Where the Ctrl-C came: ``after 12 of 167 tests of reference (STOMP)``, or between two targets."""
    if current is not None and current != last:
        return f"after {last.label}, before {current.label} finished a test"
    counted = [r for r in runs if r.target == last]
    if counted and counted[-1].total:
        return f"after {counted[-1].ran} of {counted[-1].total} tests of {last.label}"
    return f"after {len({t.test for t in results.tests})} tests of {last.label}"


def _interrupted_judging(root: Path, stderr: TextIO) -> int:
    """A Ctrl-C after every test ran, while the tables printed or the report was built: the verdicts
    are complete and stay as they are; a half-written report is removed, never left to be read."""
    shutil.rmtree(root / "report", ignore_errors=True)
    print(f"ackspec: interrupted while judging the run: report not built; the verdicts are complete in {root} "
          f"('ackspec report {root}' builds the report)", file=stderr, flush=True)
    return INTERRUPTED_EXIT


def _judge(args: argparse.Namespace, root: Path, runs: Sequence[TargetRun]) -> int:
    """The tables, the report over every target, one summary line per target; the exit status."""
    from rich.console import Console  # noqa: PLC0415

    from ackspec.cli.client_run import describe  # noqa: PLC0415

    plain = not sys.stdout.isatty()
    console = Console(soft_wrap=plain)
    bad = False
    for target_run in runs:
        results = target_run.results
        assert results is not None  # only an interrupted run lacks results
        if results.target.is_client:
            console.print(describe(results.target), markup=False, highlight=False)
            if results.extra.get("client_version_note"):
                console.print(f"[yellow]{results.extra['client_version_note']}[/]")
        print_table(console, results, plain=plain)
        _note_unexercised(console, results)
        bad = bad or any(is_failure(t.verdict, strict=args.strict) for t in results.tests)
    failing_cells = 0 if args.no_report else _report(console, root, [r.target.out for r in runs])
    for target_run in runs:
        results = target_run.results
        assert results is not None
        console.print(f"{results.target.label}: run {results.run_id}, {len(results.tests)} verdicts in "
                      f"{target_run.seconds:.1f}s -> {target_run.target.out}", markup=False, highlight=False)
        errors = [t for t in results.tests if t.verdict is Verdict.ERROR]
        if errors and len(errors) == len(results.tests):
            raise AckspecError(f"every check against {target_run.target.label} errored: "
                               f"{errors[0].message.splitlines()[0] if errors[0].message else ''}")
    if failing_cells and not bad:
        console.print(f"[red]the history check failed {failing_cells} requirement cell(s) that no test failed "
                      f"(e.g. a confirmed message never delivered): see {root / 'report'}[/]")
    return 1 if bad or failing_cells else 0


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("=")]
    for ln in reversed(lines):
        if "error" in ln.lower():
            return ln
    return lines[-1] if lines else ""

def unexercised_deviations(results: RunResults) -> list[str]:
    """Deviations of the run's profile that no test of this run showed, confirmed stale or ran at all.

    A documented deviation whose requirement was only not-applicable (or not run) is not evidence
    either way: listed so that profiles do not keep deviations no run can confirm.
    """
    from ackspec.conformance.target import ProfileError, deviations_of, load_profile, scope_protocol  # noqa: PLC0415

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
    protocol = scope_protocol(results.target.protocol, results.target.url)
    return sorted({d.requirement for d in deviations if d.requirement not in shown and d.covers_protocol(protocol)})


def _note_unexercised(console: Any, results: RunResults) -> None:
    missing = unexercised_deviations(results)
    if missing:
        console.print(f"[yellow]profile deviations this run did not exercise ({len(missing)}):[/] {', '.join(missing)}")


def _build_report(run_dirs: Sequence[Path], root: Path) -> Any:
    """The pipeline's report over ``run_dirs`` in ``root/report``; None when the pipeline is not installed."""
    import importlib  # noqa: PLC0415

    try:
        build_report = importlib.import_module("ackspec.pipeline.report").build_report
    except (ImportError, AttributeError):
        return None
    return build_report(list(run_dirs), root / "report")


def _report(console: Any, root: Path, run_dirs: Sequence[Path] | None = None) -> int:
    """Build the run's report; return how many requirement cells it fails (0 when not built).

    The report also judges the histories (loss, duplicates, order, window bounds), so a cell can
    fail there although every test passed: a run is only clean when its report is."""
    console.print("building the report ...")
    try:
        summary = _build_report(run_dirs or [root], root)
    except AckspecError as exc:
        console.print(f"[yellow]report not built: {exc}[/]")
        return 0
    return int(summary.failing_cells) if summary is not None else 0
