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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def hypothesis_settings(*, examples: int | None = None, stateful_steps: int | None = None) -> HypothesisSettings:
    """Bounded, reproducible hypothesis settings for a suite test (``examples`` scales with --examples)."""
    from hypothesis import HealthCheck, Phase, settings  # noqa: PLC0415

    kwargs: dict[str, Any] = {}
    if not CURRENT.shrink or os.environ.get(NO_SHRINK_ENV):
        kwargs["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    if stateful_steps is not None:
        kwargs["stateful_step_count"] = stateful_steps
    base = examples if examples is not None else CURRENT.examples
    scale = CURRENT.examples / DEFAULT_EXAMPLES
    return settings(
        max_examples=max(1, round(base * scale)) if examples is not None else CURRENT.examples,
        deadline=None,
        print_blob=True,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                               HealthCheck.data_too_large, HealthCheck.filter_too_much],
        **kwargs,
    )


def hypothesis_seed() -> Any:
    """The ``@seed(...)`` decorator of this run."""
    from hypothesis import seed  # noqa: PLC0415

    return seed(CURRENT.seed)
