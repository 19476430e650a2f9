"""pytest plugin: ``pytest --ackspec-target URL`` runs the conformance suite in any CI.

Registered through the ``pytest11`` entry point, so it is inert unless its
options are used or the ackspec suite is collected: only tests that use the
``harness`` fixture are judged (see :mod:`ackspec.conformance.session`).

    pytest --pyargs ackspec.conformance.suite --ackspec-target stomp://127.0.0.1:61613 --ackspec-profile activemq-5.17
    pytest --pyargs ackspec.conformance.client --ackspec-client stomp.py   # a client library (profile stomp.py-9.0)

While a test runs (setup, call, teardown), its decorator's IDs are the running test's citations
(:func:`ackspec.conformance.cited.running`): check helpers judge the test's only cited requirement,
or the one it names as ``req.NAME``, never an ID literal.

Every failure names the requirements its test cites: before any report is built from a
failing test's exception (pytest's own, JUnit's message, allure's status message, the
suite's results), :func:`name_requirements` prefixes it with ``[ID, ...]`` unless it
already names one of them. Allure's categories (one per requirement family, see
:mod:`ackspec.pipeline.allure`) match these IDs in the message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from ackspec.conformance.cited import running
from ackspec.conformance.markers import cited_ids

pytest_plugins = ["ackspec.conformance.markers"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ackspec", "ackspec conformance suite")
    group.addoption("--ackspec-target", default=None, metavar="URL",
                    help="broker URL to test (stomp://host:port, amqp://host:port); default: embedded reference broker")
    group.addoption("--ackspec-profile", default=None, metavar="NAME",
                    help="target profile (spec/targets/NAME.yaml): settings and known deviations")
    group.addoption("--ackspec-out", default=None, metavar="DIR",
                    help="run directory for results.json and histories/ (default ackspec-out/<run-id>)")
    group.addoption("--ackspec-run-id", default=None, metavar="ID", help="run id (default: time + random)")
    group.addoption("--ackspec-examples", default=None, type=int, metavar="N",
                    help="hypothesis examples per property test (default 8)")
    group.addoption("--ackspec-seed", default=None, type=int, metavar="S", help="hypothesis seed (default 0)")
    group.addoption("--ackspec-timeout", default=None, type=float, metavar="S",
                    help="seconds to wait for a receipt or message (default 5)")
    group.addoption("--ackspec-shrink", action="store_true", default=False,
                    help="shrink a failing property-based example to a minimal one (slow against a broker that "
                         "withholds frames: every step waits the timeout); default: report the first failing example")
    group.addoption("--ackspec-strict", action="store_true", default=False,
                    help="count documented deviations as failures")
    group.addoption("--ackspec-only", action="append", default=[], metavar="PATTERN",
                    help="run only suite tests whose node id or cited requirement matches this glob")
    group.addoption("--ackspec-skip", action="append", default=[], metavar="PATTERN",
                    help="deselect suite tests whose node id or cited requirement matches this glob")
    group.addoption("--ackspec-restart-command", default=None, metavar="CMD",
                    help="shell command that restarts a real target, keeping its stored messages (enables the "
                         "broker-restart tests), e.g. 'bash brokers/restart.sh artemis'")
    group.addoption("--ackspec-broker-parts", default=None, metavar="MODULE:NAME",
                    help="build the embedded reference broker from these BrokerParts (the suite's quality checks: "
                         "tests.quality.mutants:MUTANT)")
    group.addoption("--ackspec-client", default=None, metavar="NAME",
                    help="client under test of the client-side suite (ackspec.conformance.client): a registered "
                         "client, module:Class or shim:COMMAND (default: reference)")
    group.addoption("--ackspec-client-broker", default=None, metavar="NAME",
                    help="drive the client-side suite's client against this broker of brokers/ (rabbitmq, activemq, "
                         "artemis, activemq6; or ACKSPEC_CLIENT_BROKER) instead of the embedded reference broker")
    group.addoption("--ackspec-client-profile", default=None, metavar="NAME",
                    help="client profile (spec/clients/NAME.yaml) with the library's known deviations "
                         "(default: the bundled profile of that client, if any)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(*ids): requirement IDs of the catalogue a test checks")
    from ackspec.conformance import session  # noqa: PLC0415 - keep plugin import cheap

    if not config.pluginmanager.has_plugin("ackspec-suite"):
        config.pluginmanager.register(session.SuiteSession(config), "ackspec-suite")
        config.pluginmanager.register(session, "ackspec-fixtures")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Make the item's cited requirements the running test's for its setup, call and teardown."""
    try:
        ids = cited_ids(item)
    except pytest.UsageError:  # a malformed marker already failed collection
        ids = []
    with running(item.nodeid, ids):
        return (yield)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Name the cited requirements in the exception first: every report is built from it after this."""
    if call.excinfo is not None:
        try:
            ids = cited_ids(item)
        except pytest.UsageError:  # a malformed marker already failed collection
            ids = []
        name_requirements(call.excinfo.value, ids)
    yield


def name_requirements(exc: BaseException, ids: Sequence[str]) -> bool:
    """Prefix a failure's message with ``[ID, ...]`` once; return whether it was changed.

    Left alone: no IDs, outcomes that are not failures (skip, xfail, exit, ackspec's
    not-applicable and indeterminate), and messages that already name a cited requirement or
    the requirement a :class:`~ackspec.conformance.verdicts.RequirementViolation` names.
    The message is where every reporter reads it: ``args[0]`` for exceptions that print their
    arguments (``assert`` failures), ``msg`` for ``pytest.fail``, otherwise a note (shown
    after the message by Python 3.11+ and by pytest).
    """
    if not ids or isinstance(exc, _not_failures()):
        return False
    named = [*ids, *_violated(exc)]
    text = "\n".join([_message(exc), *(str(n) for n in getattr(exc, "__notes__", ()) or ())])
    if any(rid in text for rid in named):
        return False
    prefix = f"[{', '.join(ids)}]"
    if isinstance(exc, pytest.fail.Exception):
        exc.msg = f"{prefix} {exc.msg}" if exc.msg else prefix
    elif (type(exc).__str__ is BaseException.__str__ and len(exc.args) <= 1
          and all(isinstance(arg, str) for arg in exc.args)):
        exc.args = (f"{prefix} {exc.args[0]}" if exc.args and exc.args[0] else prefix,)
    else:
        exc.add_note(prefix)
    return True


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not break the report
        return ""


def _violated(exc: BaseException) -> list[str]:
    """Requirements an ackspec violation names itself (possibly not cited: an oracle's finding)."""
    from ackspec.conformance.verdicts import RequirementViolation, RequirementViolations  # noqa: PLC0415

    if isinstance(exc, RequirementViolation):
        return [exc.requirement]
    if isinstance(exc, RequirementViolations):
        return [v.requirement for v in exc.violations]
    return []


def _not_failures() -> tuple[type[BaseException], ...]:
    from ackspec.adapters.base import Indeterminate, NotSupported  # noqa: PLC0415 - keep plugin import cheap

    return (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception, KeyboardInterrupt,
            NotSupported, Indeterminate)
