"""pytest plugin: ``pytest --ackspec-target URL`` runs the conformance suite in any CI.

Registered through the ``pytest11`` entry point, so it is inert unless its
options are used or the ackspec suite is collected: only tests that use the
``harness`` fixture are judged (see :mod:`ackspec.conformance.session`).

    pytest --pyargs ackspec.conformance.suite --ackspec-target stomp://127.0.0.1:61613 --ackspec-profile activemq-5.17
"""

from __future__ import annotations

import pytest

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
    group.addoption("--ackspec-strict", action="store_true", default=False,
                    help="count documented deviations as failures")
    group.addoption("--ackspec-only", action="append", default=[], metavar="PATTERN",
                    help="run only suite tests whose node id or cited requirement matches this glob")
    group.addoption("--ackspec-skip", action="append", default=[], metavar="PATTERN",
                    help="deselect suite tests whose node id or cited requirement matches this glob")
    group.addoption("--ackspec-fault", default=None, metavar="MUTANT",
                    help="run the embedded reference broker with a mutant fault (suite quality checks)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(*ids): requirement IDs of the catalogue a test checks")
    from ackspec.conformance import session  # noqa: PLC0415 - keep plugin import cheap

    if not config.pluginmanager.has_plugin("ackspec-suite"):
        config.pluginmanager.register(session.SuiteSession(config), "ackspec-suite")
        config.pluginmanager.register(session, "ackspec-fixtures")
