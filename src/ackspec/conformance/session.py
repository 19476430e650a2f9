"""The suite's pytest machinery: fixtures, verdict conversion, and ``results.json``.

Registered by :mod:`ackspec.conformance.plugin`. Only tests that use the
``harness`` fixture (the conformance suite) are judged, or, in a session that
collects only the client-side suite (``ackspec.conformance.client``), its tests,
judged against the client under test and its client profile
(:mod:`ackspec.conformance.client_target`); every other test of a project that
has ackspec installed is left alone.

Per test and cited requirement a :class:`~ackspec.results.Verdict` is decided
(:mod:`ackspec.conformance.verdicts`) and the pytest report is adjusted so that
pytest's own exit status agrees with conformance:

* deviation  -> reported as xfailed (documented, does not fail the run);
* stale      -> reported as failed (the profile is out of date);
* not-applicable / indeterminate -> reported as skipped with the reason;
* fail / error -> failed, as pytest had it.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import itertools
import secrets
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ackspec import __version__
from ackspec.conformance import applicability
from ackspec.conformance import config as suite_config
from ackspec.conformance.client_target import (
    ClientTarget,
    classify_client,
    client_broker,
    client_spec,
    is_client_suite_item,
    resolve_client,
)
from ackspec.conformance.harness import Harness
from ackspec.conformance.target import ProfileError, Target, resolve
from ackspec.conformance.verdicts import Outcome, OutcomeKind, RequirementVerdict, classify, decide
from ackspec.history import Recorder
from ackspec.results import RunResults, TargetInfo, TestResult, Verdict, combine
from ackspec.results.layout import RunDir
from ackspec.spec import load_catalogue

SUITE_FIXTURE = "harness"


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def code_version() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).parent, check=False)
    except (OSError, subprocess.SubprocessError):
        return __version__
    return out.stdout.strip() or __version__


def requirement_levels() -> dict[str, str]:
    """``{id: level}`` of the catalogue (cached by the spec loader)."""
    return {rid: req.level.value for rid, req in load_catalogue().requirements.items()}


def requirements_of(item: pytest.Item) -> list[str]:
    ids: list[str] = []
    for marker in item.iter_markers("requirement"):
        for arg in marker.args:
            for rid in ([arg] if isinstance(arg, str) else list(arg)):
                if rid not in ids:
                    ids.append(rid)
    return ids


@dataclass
class _ItemState:
    requirements: list[str]
    verdicts: list[RequirementVerdict] = field(default_factory=list)
    duration: float = 0.0
    decided: bool = False
    notes: str = ""
    inapplicable: Mapping[str, str] = field(default_factory=dict)  # requirement -> capability it lacks
    target: str = ""


class SuiteSession:
    """Per-session state of the plugin (one instance registered per pytest run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        opt = config.getoption
        self.url: str | None = opt("ackspec_target")
        self.profile_name: str | None = opt("ackspec_profile")
        self.broker_parts: str | None = opt("ackspec_broker_parts")
        self.restart_command: str | None = opt("ackspec_restart_command")
        self.run_id: str = opt("ackspec_run_id") or new_run_id()
        out = opt("ackspec_out")
        self.out_dir = Path(out) if out else Path("ackspec-out") / self.run_id
        self.run_dir = RunDir(self.out_dir)
        self.strict: bool = bool(opt("ackspec_strict"))
        self.started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self.states: dict[str, _ItemState] = {}
        self.order: list[str] = []
        self.target: Target | None = None
        self._target_error: BaseException | None = None
        self.counter = itertools.count(1)
        self.levels: dict[str, str] = {}
        self.results: RunResults | None = None
        self.client_spec = client_spec(config)
        self.client_profile_name: str | None = opt("ackspec_client_profile")
        self.client: ClientTarget | None = None  # set when the session runs the client-side suite alone
        self.interrupted = False
        suite_config.CURRENT = suite_config.SuiteConfig(
            examples=int(opt("ackspec_examples") or suite_config.DEFAULT_EXAMPLES),
            seed=int(opt("ackspec_seed") if opt("ackspec_seed") is not None else suite_config.DEFAULT_SEED),
            timeout=float(opt("ackspec_timeout") or suite_config.DEFAULT_TIMEOUT),
            shrink=bool(opt("ackspec_shrink")),
        )

    @property
    def active(self) -> bool:
        return bool(self.order)

    # -- collection ----------------------------------------------------------------------

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        only: list[str] = config.getoption("ackspec_only") or []
        skip: list[str] = config.getoption("ackspec_skip") or []
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        judged = self._judged_items(items)
        for item in items:
            if item not in judged:
                keep.append(item)
                continue
            reqs = requirements_of(item)
            names = [item.nodeid, *reqs]
            if (only and not _matches(names, only)) or (skip and _matches(names, skip)):
                dropped.append(item)
                continue
            keep.append(item)
            self.states[item.nodeid] = _ItemState(reqs)
            self.order.append(item.nodeid)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        if self.order:
            self.levels = requirement_levels()

    def _judged_items(self, items: list[pytest.Item]) -> set[pytest.Item]:
        """The broker suite's tests; or, when the session holds no broker test, the client-side suite's.

        One run judges one thing (results.json names one target), so a session collecting both
        judges the broker suite and leaves the client-side tests as plain pytest tests."""
        broker = {item for item in items if SUITE_FIXTURE in getattr(item, "fixturenames", ())}
        client = {item for item in items if is_client_suite_item(item)} - broker
        if broker or not client:
            return broker
        try:
            self.client = resolve_client(self.client_spec, self.client_profile_name, client_broker(self.config))
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from exc
        return client

    def client_log_path(self, nodeid: str) -> Path | None:
        """Where a judged client-side test keeps its evidence (client events, wire frames); None otherwise."""
        if self.client is None or nodeid not in self.states:
            return None
        return self.run_dir.client_log_path(nodeid)

    def note_client(self, cut: Any, broker: str) -> None:
        """The client-side fixtures report each client they build (its library, version and broker)."""
        if self.client is not None:
            self.client.note(cut, broker)

    # -- the target --------------------------------------------------------------------------

    def get_target(self) -> Target:
        if self.target is None:
            if self._target_error is not None:
                raise self._target_error
            try:
                self.target = resolve(self.url, self.profile_name, broker_parts=self.broker_parts,
                                      restart_command=self.restart_command)
            except ProfileError as exc:
                self._target_error = pytest.UsageError(str(exc))
                raise self._target_error from exc
            except BaseException as exc:
                self._target_error = exc
                raise
        return self.target

    # -- verdicts ---------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        state = self.states.get(item.nodeid)
        if state is None or state.decided:
            return
        report = outcome.get_result()  # type: ignore[attr-defined]
        if call.when == "setup" and report.passed:
            return
        if call.when == "teardown" and not report.failed:
            return
        exc = call.excinfo.value if call.excinfo is not None else None
        if isinstance(exc, pytest.skip.Exception):
            judged = Outcome(OutcomeKind.NOT_APPLICABLE, str(exc.msg or "skipped"))
        elif call.when == "teardown":
            judged = Outcome(OutcomeKind.ERROR, f"clean-up failed: {exc}")
        else:
            judged = classify_client(exc) if self.client is not None else classify(exc)
        judge = self.client if self.client is not None else self.target
        deviations = judge.deviations_for(item.nodeid) if judge is not None else {}
        intermittent = judge.intermittent_for(item.nodeid) if judge is not None else frozenset()
        excuse = judge.excuse_for(item.nodeid) if judge is not None else None
        state.verdicts = _without_capabilities(
            decide(state.requirements or ["(none)"], judged, deviations, intermittent, excuse), state)
        state.duration = call.duration
        state.decided = True
        state.notes = _notes(exc)
        _adjust(report, item, state.verdicts)

    # -- results -------------------------------------------------------------------------------

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = True

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write ``results.json``: partial and marked ``interrupted`` after a Ctrl-C; not at all for a
        dry run (``--collect-only``), which must leave no run directory behind."""
        if not self.active or self.config.option.collectonly:
            return
        self.interrupted = self.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED
        tests: list[TestResult] = []
        for nodeid in self.order:
            state = self.states[nodeid]
            if not state.decided:
                continue  # deselected or not run
            history = self.run_dir.client_log_path(nodeid) if self.client else self.run_dir.history_path(nodeid)
            rel = str(history.relative_to(self.out_dir)) if history.exists() else None
            for v in state.verdicts:
                message = v.message
                if state.notes and v.verdict in (Verdict.FAIL, Verdict.DEVIATION):
                    message = f"{message}\n{state.notes}"
                tests.append(TestResult(
                    requirement=v.requirement, test=nodeid, verdict=v.verdict, level=self.levels.get(v.requirement),
                    seed=suite_config.CURRENT.seed, duration=round(state.duration, 4), message=message,
                    capability=v.capability, history=rel, operations=v.operations,
                ))
        target = self.target
        info = self.client.info() if self.client is not None else TargetInfo(
            url=target.url if target else (self.url or "reference://embedded"),
            profile=target.profile_name if target else self.profile_name,
            protocol=(target.protocol or None) if target else None,
            adapter=(target.adapter_name or None) if target else None)
        self.results = RunResults(
            run_id=self.run_id, started=self.started,
            finished=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), target=info, tests=tuple(tests),
            seed=suite_config.CURRENT.seed, strict=self.strict, ackspec_version=__version__,
            code_version=code_version(),
            extra={"examples": suite_config.CURRENT.examples, "timeout": suite_config.CURRENT.timeout,
                   "shrink": suite_config.CURRENT.shrink, "broker_parts": self.broker_parts, **self._client_extra()},
            interrupted=self.interrupted,
        )
        self.results.write(self.run_dir.results)
        if target is not None:
            target.close()

    def _client_extra(self) -> dict[str, Any]:
        if self.client is None:
            return {}
        note = self.client.version_note()
        return {"client": self.client.spec, **({"client_version_note": note} if note else {})}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.results is None:
            return
        by: dict[str, list[str]] = {}
        for nodeid in self.order:
            state = self.states[nodeid]
            for v in state.verdicts:
                by.setdefault(str(v.verdict), []).append(v.requirement)
        counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(by.items()))
        terminalreporter.write_sep("-", "ackspec verdicts")
        terminalreporter.write_line(f"run {self.run_id}: {counts}")
        if self.results.interrupted:
            terminalreporter.write_line("interrupted: these verdicts are partial (not conformant)")
        for level in ("MUST", "MUST-NOT", "SHOULD", "SHOULD-NOT"):
            failed = sorted({t.requirement for t in self.results.tests
                             if t.verdict is Verdict.FAIL and (t.level or "") == level})
            if failed:
                terminalreporter.write_line(f"{level} failures: {', '.join(failed)}")
        terminalreporter.write_line(f"results: {self.run_dir.results}")


def _session(request: pytest.FixtureRequest) -> SuiteSession:
    plugin = request.config.pluginmanager.get_plugin("ackspec-suite")
    assert isinstance(plugin, SuiteSession), "the ackspec plugin is not registered"
    return plugin


@pytest.fixture(scope="session")
def ackspec_target(request: pytest.FixtureRequest) -> Target:
    """The system under test (started once per session when embedded)."""
    return _session(request).get_target()


@pytest.fixture
def harness(request: pytest.FixtureRequest, ackspec_target: Target) -> Iterator[Harness]:
    """Per-test access to the target, recording the test's history into RUN/histories/."""
    suite = _session(request)
    nodeid = request.node.nodeid
    recorder = Recorder(suite.run_id, target=ackspec_target.profile_name or ackspec_target.url,
                        path=suite.run_dir.history_path(nodeid))
    recorder.test = nodeid
    adapter = ackspec_target.make_adapter(recorder, suite_config.CURRENT.timeout)
    state = suite.states.get(nodeid)
    cited = state.requirements if state is not None else requirements_of(request.node)
    try:
        inapplicable = applicability.gate(cited, adapter.capabilities, f"{adapter.name} against {adapter.url}")
    except BaseException:
        adapter.close()
        recorder.close()
        raise
    if state is not None:
        state.inapplicable, state.target = inapplicable, f"{adapter.name} against {adapter.url}"
    h = Harness(adapter, recorder, run_tag=suite.run_id.split("-")[-1], test_index=next(suite.counter),
                timeout=suite_config.CURRENT.timeout, settings=ackspec_target.settings,
                broker=ackspec_target.broker, restart=ackspec_target.restart,
                requirements=cited, knobs=(ackspec_target.profile or {}).get("knobs"))
    try:
        yield h
    finally:
        h.close()
        adapter.close()
        recorder.close()


def _matches(names: list[str], patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(n, p) or fnmatch.fnmatch(n, f"*{p}*") for n in names for p in patterns)


def _without_capabilities(verdicts: list[RequirementVerdict], state: _ItemState) -> list[RequirementVerdict]:
    """A requirement whose capabilities the target lacks was not exercised: not-applicable, naming the
    capability, unless the test found it violated all the same (see :mod:`ackspec.conformance.applicability`)."""
    def judged(verdict: RequirementVerdict) -> RequirementVerdict:
        cap = state.inapplicable.get(verdict.requirement)
        if cap is None or verdict.verdict not in applicability.UNCHECKED:
            return verdict
        message = applicability.not_applicable_message(verdict.requirement, cap, state.target)
        return RequirementVerdict(verdict.requirement, Verdict.NOT_APPLICABLE, message, capability=cap)

    return [judged(v) for v in verdicts]


def _notes(exc: BaseException | None) -> str:
    """Hypothesis' falsifying example and reproduce blob, kept in the results message."""
    if exc is None:
        return ""
    notes = [str(n) for n in getattr(exc, "__notes__", []) or []]
    if any("Falsifying" in n for n in notes):
        run = suite_config.CURRENT
        notes.append(f"hypothesis seed {run.seed}: " + (
            "the example was shrunk (--shrink)" if run.shrink else
            f"the first failing example, not shrunk; rerun with --seed {run.seed} --shrink for a minimal one"))
    return "\n".join(notes)[-4000:]


def _adjust(report: pytest.TestReport, item: pytest.Item, verdicts: list[RequirementVerdict]) -> None:
    worst = combine(v.verdict for v in verdicts)
    message = "; ".join(f"{v.requirement}: {v.verdict}" + (f" ({v.message})" if v.message else "")
                        for v in verdicts if v.verdict is worst)
    path, line = str(item.path), (item.location[1] or 0) + 1
    if worst is Verdict.STALE:
        report.outcome = "failed"
        report.longrepr = f"stale deviation: {message}"
    elif worst is Verdict.DEVIATION:
        report.outcome = "skipped"
        report.wasxfail = message
    elif worst in (Verdict.NOT_APPLICABLE, Verdict.INDETERMINATE) and not report.passed:
        report.outcome = "skipped"
        report.longrepr = (path, line, f"{worst}: {message}")
