"""`ackspec spec coverage` counts the client-side suite (ackspec.conformance.client) as part of the suite:
a client-side rule is covered by the test that `ackspec run --client` runs, not only by project tests."""

from __future__ import annotations

import json

import pytest

from ackspec.cli import main

CLIENT_ONLY = ("JMS-7.3.8-CALLBACK-ORDER", "ARTEMIS-CONFIRMATION-WINDOW", "AMQ-OPTIMIZE-ACK-BATCH-FACTOR")


def test_client_side_rules_are_covered_by_the_client_side_suite(capsys: pytest.CaptureFixture[str]) -> None:
    main(["spec", "coverage", "--json"])
    report = json.loads(capsys.readouterr().out)
    for rid in CLIENT_ONLY:
        where = report["covered"].get(rid, [])
        assert any("conformance/client/test_" in place for place in where), (rid, where)
