"""Verdicts and the results file of a run: what the suite writes and the pipeline reads."""

from ackspec.results.model import (
    RESULTS_SCHEMA,
    ResultsFormatError,
    RunResults,
    TargetInfo,
    TestResult,
)
from ackspec.results.verdict import Verdict, combine, is_failure

__all__ = [
    "RESULTS_SCHEMA",
    "ResultsFormatError",
    "RunResults",
    "TargetInfo",
    "TestResult",
    "Verdict",
    "combine",
    "is_failure",
]
