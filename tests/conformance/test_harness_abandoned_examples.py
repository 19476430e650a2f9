"""A hypothesis example abandoned between draws declares what it sent left (Harness.example), generically.

Hypothesis stops an example whose data ran out (or whose ``assume`` failed) by raising from inside its
body; a property that sent messages before that draw leaves them undrained. These tests run real
hypothesis properties over a harness whose sends are recorded, and force the abandonment with hypothesis'
own means: a draw it cannot make (``st.nothing()``: hypothesis ends the example between draws with the
same StopTest as when its data runs out, without generating the megabytes an overrun needs), and
``assume(False)``.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from tests.conformance.test_harness_intent import make_harness, sent

from ackspec.conformance import suite
from ackspec.conformance.harness import Harness
from ackspec.history import INTENT_KEY, Op
from ackspec.history.checks import check_history

QUIET = settings(max_examples=5, database=None, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.filter_too_much])
"""Fixed (derandomized), and one health check off: these properties stop or reject every example on
purpose, which that check reports as filtered data (the behaviour under test, not a flaw of a strategy)."""


def _left(h: Harness) -> set[tuple[str | None, str | None, int | None]]:
    return {(r.destination, r.producer, r.seq) for r in h.recorder.records
            if r.op is Op.EXPECT and r.value[INTENT_KEY] == "left"}


def test_an_example_stopped_between_draws_after_sending_declares_its_sends_left() -> None:
    h = make_harness()
    queues = itertools.count()

    @QUIET
    @given(data=st.data())
    @h.example
    def sends_then_draws_too_much(data: st.DataObject) -> None:
        q = h.queue(f"e{next(queues)}")
        for seq in range(3):
            sent(h, q, seq)
        data.draw(st.nothing(), label="a value there is none of")

    with pytest.raises(Unsatisfiable):  # every example was stopped: hypothesis says so once it gives up
        sends_then_draws_too_much()
    sends = {(r.destination, r.producer, r.seq) for r in h.recorder.records if r.op is Op.SEND}
    assert sends and _left(h) == sends, "every send of the abandoned examples is declared left"
    assert check_history(h.recorder.records) == [], "the abandoned examples' messages counted lost"


def test_a_rejected_example_declares_its_sends_left() -> None:
    h = make_harness()

    @QUIET
    @given(seq=st.integers(0, 9))
    @h.example
    def sends_then_rejects(seq: int) -> None:
        sent(h, h.queue("rejected"), seq)
        assume(False)

    with pytest.raises(Unsatisfiable):  # hypothesis finds no example its assume accepts
        sends_then_rejects()
    assert _left(h) and check_history(h.recorder.records) == []


def test_a_failing_example_keeps_its_loss_as_evidence() -> None:
    h = make_harness()
    q = h.queue("failing")

    @QUIET
    @given(seq=st.integers(0, 9))
    @h.example
    def sends_then_fails(seq: int) -> None:
        sent(h, q, seq)
        raise AssertionError("the property's own verdict")

    with pytest.raises(AssertionError, match="own verdict"):
        sends_then_fails()
    assert _left(h) == set(), "a failing example declared its sends left"
    assert check_history(h.recorder.records), "the failing example's unconsumed sends are no longer losses"


def test_a_completed_example_declares_nothing() -> None:
    h = make_harness()

    @QUIET
    @given(seq=st.integers(0, 9))
    @h.example
    def completes(seq: int) -> None:
        sent(h, h.queue("done"), seq)

    completes()
    assert _left(h) == set()


SUITE = Path(suite.__file__).parent


def _unwrapped_properties() -> list[str]:
    """Every ``@given`` body inside a suite test with a ``harness`` that is not wrapped in ``@harness.example``."""
    missing = []
    for path in sorted(SUITE.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for test in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")):
            if "harness" not in {a.arg for a in test.args.args}:
                continue
            for node in ast.walk(test):
                if node is test or not isinstance(node, ast.FunctionDef):
                    continue
                decorators = [ast.unparse(d) for d in node.decorator_list]
                if any(d.startswith("given(") for d in decorators) and "harness.example" not in decorators:
                    missing.append(f"{path.relative_to(SUITE)}::{test.name}.{node.name}")
    return missing


def test_every_suite_property_wraps_its_body_in_harness_example() -> None:
    """So every property of the suite gets the declaration, not only those that send before a draw today."""
    assert _unwrapped_properties() == []
