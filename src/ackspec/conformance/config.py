"""Run-wide settings of the suite (from the ``--ackspec-*`` options), readable at import time.

Hypothesis settings are decorators evaluated when a test module is imported,
which happens after ``pytest_configure``; the plugin fills :data:`CURRENT` there
and the property-based tests read it through :func:`hypothesis_settings`.

Reproducibility: every run has a seed (default 0, so CI runs are repeatable);
``--seed S`` changes it and ``--examples N`` explores further. The seed is
written to ``results.json`` and a failure prints the ``@reproduce_failure``
blob next to the falsifying operations.

Shrinking is off by default: against a broker that loses or withholds frames every
shrink step waits the full receive timeout again, so one failing property took minutes
to shrink (479 to 1,190 s per run, issue 16). A failing test reports the first failing
example hypothesis found, unshrunk, with the run's seed; ``--shrink`` (``shrink=True``)
restores hypothesis' deep shrinking for a minimal example.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from hypothesis import settings as HypothesisSettings

DEFAULT_EXAMPLES = 8
DEFAULT_SEED = 0
DEFAULT_TIMEOUT = 5.0
NO_SHRINK_ENV = "ACKSPEC_NO_SHRINK"
"""Set (to anything) to skip hypothesis' shrinking even when ``shrink`` is asked for (quality checks)."""


@dataclass
class SuiteConfig:
    examples: int = DEFAULT_EXAMPLES
    seed: int = DEFAULT_SEED
    timeout: float = DEFAULT_TIMEOUT
    shrink: bool = False


CURRENT = SuiteConfig()

T = TypeVar("T")


def profile_name() -> str:
    """The hypothesis settings profile of this run's depth, registered on first use (see :func:`run_profile`)."""
    shrink = CURRENT.shrink and not os.environ.get(NO_SHRINK_ENV)
    name = f"ackspec-{CURRENT.examples}{'-shrink' if shrink else ''}"
    from hypothesis import settings  # noqa: PLC0415
    from hypothesis.errors import InvalidArgument  # noqa: PLC0415

    try:
        settings.get_profile(name)
    except InvalidArgument:  # not registered yet
        settings.register_profile(name, run_profile(CURRENT.examples, shrink=shrink))
    return name


def run_profile(examples: int, *, shrink: bool) -> HypothesisSettings:
    """The suite's hypothesis settings at one run depth (``--examples``), registered as profile
    ``ackspec-N`` (``ackspec-N-shrink`` with ``--shrink``): every property of the run derives from it.

    No example database (a run is reproduced by its seed, not by files left behind), no deadline (an
    example waits on a broker), the ``@reproduce_failure`` blob printed. One health check stays off:
    ``function_scoped_fixture``, because a suite property runs inside its test and uses that test's
    ``harness`` (connections, history, unique names) in every example on purpose: the fixture is the
    broker session the examples share, not state that should be reset between them.
    """
    from hypothesis import HealthCheck, Phase, settings  # noqa: PLC0415

    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(max_examples=examples, deadline=None, print_blob=True, database=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture], phases=phases)


def hypothesis_settings(*, examples: int | None = None, stateful_steps: int | None = None) -> HypothesisSettings:
    """A suite test's settings: the run's profile, with ``examples`` (a test's own base, scaled by
    --examples like the default) and ``stateful_steps`` where given."""
    from hypothesis import settings  # noqa: PLC0415

    kwargs: dict[str, Any] = {}
    if stateful_steps is not None:
        kwargs["stateful_step_count"] = stateful_steps
    if examples is not None:
        kwargs["max_examples"] = max(1, round(examples * CURRENT.examples / DEFAULT_EXAMPLES))
    return settings(settings.get_profile(profile_name()), **kwargs)


def hypothesis_seed() -> Callable[[T], T]:
    """The ``@seed(...)`` decorator of this run (hypothesis' public API): on a ``@given`` function, or
    on a ``RuleBasedStateMachine`` class, which ``run_state_machine_as_test`` honours."""
    from hypothesis import seed  # noqa: PLC0415

    return cast("Callable[[T], T]", seed(CURRENT.seed))
