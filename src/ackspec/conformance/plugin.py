"""pytest plugin: ``pytest --ackspec-target URL`` runs the conformance suite in any CI.

Registered through the ``pytest11`` entry point, so it is inert unless its
options are used or the ackspec suite is collected.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ackspec", "ackspec conformance suite")
    group.addoption("--ackspec-target", default=None, metavar="URL",
                    help="broker URL to test (stomp://host:port, amqp://host:port); default: embedded reference broker")
