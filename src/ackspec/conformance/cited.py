"""Which requirement a check judges, taken from the test's own ``@requirement`` decorator.

A requirement ID is written once per test: in its decorator. Check helpers
(:func:`ackspec.conformance.verdicts.check`, :class:`~ackspec.conformance.verdicts.Checks`,
:func:`~ackspec.conformance.verdicts.violation`, ``harness.check``, ``harness.expect_n``, ...) take
the requirement from the test they run in:

* a test citing **one** requirement names none: every check judges that one;

      @requirement("STOMP-HEADER-REPEATED-FIRST-WINS")
      def test_repeated_header_first_wins(harness):
          ...
          check(d.headers.get("x-dup") == "first", f"x-dup arrived as {d.headers.get('x-dup')!r}")

* a test citing **several** names the one each check judges through :data:`req`, whose attributes are
  the cited IDs with every run of characters other than letters and digits written ``_``
  (``STOMP-HEADER-ESCAPING`` is ``req.STOMP_HEADER_ESCAPING``, ``JMS-7.3.8-CALLBACK-ORDER`` is
  ``req.JMS_7_3_8_CALLBACK_ORDER``):

      @requirement("STOMP-SEND-HEADERS-PASSED", "STOMP-HEADER-ESCAPING")
      def test_custom_headers_round_trip(harness):
          ...
          checks.check(got == sent, f"{k}: sent {sent!r}, got {got!r}", requirement=req.STOMP_HEADER_ESCAPING)

Nothing can drift: ``req.X`` resolves against the running test's decorator when it is evaluated and
raises :class:`CitationError` when the test does not cite ``X`` (a helper shared by several tests
may name a requirement only the tests that cite it call it for); a check without a requirement in
a test citing several raises it too, before the check is judged, so a check is never silently charged
to another requirement. :class:`CitationError` is not an ``AssertionError``: the suite itself is
wrong, and the test's verdict is *error*. ``tests/conformance/test_no_id_literals.py`` keeps ID
literals out of the suite's test bodies (decorators are the one place for them) and checks that every
``req.X`` a test body names is cited by that test's decorator.

Oracles that find a requirement by themselves (the executable model, the history checks) still
raise :class:`~ackspec.conformance.verdicts.RequirementViolation` with the ID they computed; that is
not a literal in a test.

The plugin (:mod:`ackspec.conformance.plugin`) sets the running test's citations around its setup,
call and teardown (:func:`running`); threads a test starts see them too (one test runs at a time).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

_NOT_NAME = re.compile(r"[^0-9A-Za-z]+")


class CitationError(Exception):
    """A check named a requirement its test does not cite, or named none where the test cites several."""


def attribute_name(requirement_id: str) -> str:
    """``req``'s attribute for an ID: each run of characters other than letters and digits becomes ``_``."""
    return _NOT_NAME.sub("_", requirement_id).strip("_")


@dataclass(frozen=True, slots=True)
class Citations:
    """The requirements one test cites (its decorator's IDs, in order) and what names them."""

    test: str
    ids: tuple[str, ...]

    def __post_init__(self) -> None:
        names: dict[str, str] = {}
        for rid in self.ids:
            clash = names.setdefault(attribute_name(rid), rid)
            if clash != rid:
                raise CitationError(f"{self.test}: cited {clash} and {rid} have the same name "
                                    f"req.{attribute_name(rid)}")

    def by_name(self, name: str) -> str:
        """The cited ID whose attribute name is ``name``; :class:`CitationError` if the test cites none."""
        for rid in self.ids:
            if attribute_name(rid) == name:
                return rid
        raise CitationError(f"{self.test} names req.{name} but does not cite it (cites: {self._listed()})")

    def judged(self, requirement: str | None) -> str:
        """What a check judges: ``requirement`` if the test cites it, else the test's only cited one."""
        if requirement is not None:
            if requirement not in self.ids:
                raise CitationError(f"{self.test} checks {requirement} but does not cite it "
                                    f"(cites: {self._listed()})")
            return requirement
        if len(self.ids) != 1:
            raise CitationError(f"{self.test} cites {self._listed()}: a check must name the one it judges "
                                "(requirement=req.NAME)" if self.ids else
                                f"{self.test} cites no requirement: a check has nothing to judge")
        return self.ids[0]

    def _listed(self) -> str:
        return ", ".join(self.ids) or "nothing"


OUTSIDE = Citations("(no test running)", ())
_current: Citations = OUTSIDE


def current() -> Citations:
    """The running test's citations (:data:`OUTSIDE` between tests)."""
    return _current


@contextlib.contextmanager
def running(test: str, ids: Iterable[str]) -> Iterator[Citations]:
    """Make ``ids`` the citations of the running test ``test`` for the block."""
    global _current  # noqa: PLW0603 - one test runs at a time; its threads must see it too
    previous, _current = _current, Citations(test, tuple(ids))
    try:
        yield _current
    finally:
        _current = previous


def judged(requirement: str | None) -> str:
    """What a check in the running test judges (see :meth:`Citations.judged`)."""
    return _current.judged(requirement)


class _Cited:
    """:data:`req`: the running test's cited IDs by attribute name."""

    __slots__ = ()

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):  # no ID's name starts with "_": tools probing for private attributes get none
            raise AttributeError(name)
        return _current.by_name(name)


req = _Cited()
"""``req.STOMP_ACK_CLIENT`` is ``"STOMP-ACK-CLIENT"`` while a test citing it runs; anything else raises."""
