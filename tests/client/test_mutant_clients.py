"""The client-side tests must fail against broken clients: each mutant breaks one rule.

A mutant is the reference client with one piece of its send bookkeeping sabotaged; the
conformance test for that rule is run against it and must raise AssertionError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ackspec.adapters.refclient import RefClientCUT
from ackspec.conformance.client import test_jms_send as jms
from ackspec.conformance.client.conftest import Env
from ackspec.conformance.client.cut import ClientUnderTest
from ackspec.reference.client.send_core import Complete, SendState, SendTracker


class _Mutant(RefClientCUT):
    def open(self, url: str, options: Any = None) -> None:
        super().open(url, options)
        self.mutate(self.connection._tracker)

    def mutate(self, tracker: SendTracker) -> None:
        raise NotImplementedError


class UnorderedCallbacks(_Mutant):
    """Releases any completed send at once, not in send order (breaks 7.3.8)."""

    def mutate(self, tracker: SendTracker) -> None:
        def release(producer: str) -> list[Any]:
            queue = tracker._per_producer.get(producer)
            out = []
            for send in list(queue or ()):
                if send.state is not SendState.PENDING:
                    queue.remove(send)  # type: ignore[union-attr]
                    send.released = send.callback_running = True
                    out.append(Complete(send))
            return out

        tracker._release = release  # type: ignore[method-assign]


class EarlyCompletion(_Mutant):
    """Completes asynchronous sends when written, before the broker confirmed (breaks 7.3.1)."""

    def mutate(self, tracker: SendTracker) -> None:
        original = tracker.sent

        def sent(token: str) -> list[Any]:
            send = tracker.get(token)
            if send is not None:
                send.wants_receipt = False
            return original(token)

        tracker.sent = sent  # type: ignore[method-assign]


class CloseDoesNotWait(_Mutant):
    """Reports no incomplete sends, so close returns at once (breaks 7.3.4)."""

    def mutate(self, tracker: SendTracker) -> None:
        tracker.incomplete = lambda scope: 0  # type: ignore[method-assign]


MUTANTS: list[tuple[type[_Mutant], Callable[..., None]]] = [
    (UnorderedCallbacks, jms.test_callback_order_across_destinations_and_mixed_with_sync),
    (UnorderedCallbacks, jms.test_rejections_reported_by_on_exception_in_send_order),
    (EarlyCompletion, jms.test_completion_only_after_confirmation_and_sends_pipeline),
    (CloseDoesNotWait, jms.test_close_waits_for_incomplete_sends_which_complete_normally),
    (CloseDoesNotWait, jms.test_commit_waits_for_incomplete_sends),
]


@pytest.mark.parametrize(("mutant", "check"), MUTANTS, ids=[f"{m.__name__}-{c.__name__}" for m, c in MUTANTS])
def test_conformance_test_catches_mutant(mutant: type[_Mutant], check: Callable[..., None], env: Env) -> None:
    cut: ClientUnderTest = mutant()
    cut.open(env.url, {})
    try:
        with pytest.raises(AssertionError):
            check(cut, env)
    finally:
        env.proxy.clear()
        cut.close()


@pytest.mark.parametrize("check", sorted({c for _, c in MUTANTS}, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_same_checks_pass_for_the_reference_client(check: Callable[..., None], env: Env) -> None:
    cut = RefClientCUT()
    cut.open(env.url, {})
    try:
        check(cut, env)
    finally:
        env.proxy.clear()
        cut.close()
