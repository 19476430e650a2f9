"""The client under test of a client-side suite run, judged like a broker target.

A run of the client-side suite (``src/ackspec/conformance/client``) judges a client library, not
a broker: :class:`ClientTarget` holds which client (a registered name, ``module:Class`` or
``shim:COMMAND``), its client profile (``spec/clients/``: the library's known deviations), and what
the run learnt about it from the first client the tests built (library, version, protocol, the
broker it ran against). The suite session asks it for the deviations of each test, exactly as it
asks a broker :class:`~ackspec.conformance.target.Target`, and writes its :meth:`info` as the
run's target in ``results.json``.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ackspec.conformance.target import KnownDeviation, ProfileError
from ackspec.conformance.verdicts import Outcome, OutcomeKind, classify
from ackspec.results import TargetInfo

CLIENT_SUITE_PACKAGE = "ackspec.conformance.client"
CLIENT_BROKER_ENV = "ACKSPEC_CLIENT_BROKER"
"""Names the broker of brokers/ the client-side suite drives the client against (as ``--ackspec-client-broker``)."""
DEFAULT_CLIENT = "reference"
REFERENCE_BROKER = "reference"  # the target profile of the embedded reference broker the client suite uses


class ClientBrokerMismatch(RuntimeError):
    """The client ran against another broker than the one asked for: its verdicts would be misattributed."""


class UnknownClientError(ValueError):
    """A client name that is not registered, cannot be loaded, or a shim command that does not exist."""


def client_spec(config: Any) -> str:
    """The client under test a pytest session names: ``--ackspec-client``, else ``ACKSPEC_CLIENT``, else
    the reference client."""
    try:
        name = config.getoption("--ackspec-client")
    except ValueError:
        name = None
    return str(name or os.environ.get("ACKSPEC_CLIENT") or DEFAULT_CLIENT)


def client_broker(config: Any) -> str | None:
    """The broker of brokers/ a pytest session asks the client-side suite to use: ``--ackspec-client-broker``,
    else ``ACKSPEC_CLIENT_BROKER``, else None (the embedded reference broker). The fixtures and the
    session read it here, so what runs and what results.json credits cannot disagree."""
    try:
        name = config.getoption("--ackspec-client-broker")
    except ValueError:
        name = None
    return str(name) if name else (os.environ.get(CLIENT_BROKER_ENV) or None)


def is_client_suite_item(item: Any) -> bool:
    """Whether a pytest item is a test of the client-side suite (its module is in the suite's package)."""
    module = getattr(getattr(item, "module", None), "__name__", "") or ""
    return module.startswith(CLIENT_SUITE_PACKAGE + ".")


def check_client(spec: str) -> None:
    """Raise :class:`UnknownClientError` (one line) unless ``spec`` names a client that can be built."""
    from ackspec.adapters.clients import UnknownClient, factory  # noqa: PLC0415

    if spec.startswith("shim:"):
        argv = shlex.split(spec[len("shim:"):])
        if not argv:
            raise UnknownClientError("shim: needs a command line, e.g. shim:'python -m ackspec.adapters.shim'")
        if shutil.which(argv[0]) is None:
            raise UnknownClientError(f"shim command not found: {argv[0]!r} (from {spec!r})")
        return
    try:
        factory(spec)
    except UnknownClient as exc:
        raise UnknownClientError(str(exc)) from exc
    except ImportError as exc:  # a registered client whose library is not installed
        raise UnknownClientError(f"client {spec!r} cannot be loaded: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """What a built client under test says about itself."""

    driver: str
    library: str
    version: str
    protocol: str
    broker: str


@dataclass
class ClientTarget:
    """The client a client-side run judges, its profile, and the broker it was asked to run against."""

    spec: str
    profile: Any = None  # ackspec.spec.client_profiles.ClientProfile
    identity: ClientIdentity | None = None
    expected_broker: str | None = None  # the target profile of the broker asked for (None: the reference broker)

    @property
    def profile_name(self) -> str | None:
        return self.profile.name if self.profile is not None else None

    @property
    def broker(self) -> str:
        if self.identity is not None:
            return self.identity.broker
        return self.expected_broker or REFERENCE_BROKER

    def note(self, cut: Any, broker: str) -> None:
        """Remember the first client the tests built: its library, version and protocol, and the broker."""
        if broker != (self.expected_broker or REFERENCE_BROKER):
            raise ClientBrokerMismatch(f"the client-side suite drove the client against {broker}, not "
                                       f"{self.expected_broker or REFERENCE_BROKER} as asked: its fixtures do not "
                                       "support that broker")
        if self.identity is not None:
            return
        self.identity = ClientIdentity(driver=str(getattr(cut, "name", self.spec)),
                                       library=str(getattr(cut, "library", "") or getattr(cut, "name", self.spec)),
                                       version=str(getattr(cut, "library_version", "") or ""),
                                       protocol=str(getattr(cut, "protocol", "stomp")), broker=broker)

    def _known(self) -> list[KnownDeviation]:
        if self.profile is None:
            return []
        return [KnownDeviation(d.requirement, d.reason, d.test, (), d.intermittent)
                for d in self.profile.deviations_on(self.broker)]

    def deviations_for(self, nodeid: str) -> dict[str, str]:
        """``{requirement: reason}`` of the profile's deviations for one test on this run's broker."""
        return {d.requirement: d.reason for d in self._known() if d.applies_to(nodeid)}

    def excuse_for(self, nodeid: str) -> Callable[[str, str], str | None]:
        """``excuse(requirement, message)``: the reason of the profile's deviation that documents this failure
        (its test, broker and ``check`` match), or None: then it stays a failure."""
        scoped = [d for d in (self.profile.deviations_on(self.broker) if self.profile is not None else ())
                  if KnownDeviation(d.requirement, d.reason, d.test).applies_to(nodeid)]

        def excuse(requirement: str, message: str) -> str | None:
            return next((d.reason for d in scoped if d.requirement == requirement and d.excuses(message)), None)

        return excuse

    def intermittent_for(self, nodeid: str) -> frozenset[str]:
        return frozenset(d.requirement for d in self._known() if d.intermittent and d.applies_to(nodeid))

    def version_note(self) -> str | None:
        """A line when the library's version is not the one its profile was observed with."""
        if self.profile is None or self.identity is None or not self.identity.version:
            return None
        if self.identity.version == self.profile.version:
            return None
        return (f"client profile {self.profile.name} was observed with {self.profile.library} "
                f"{self.profile.version}; this run drove {self.identity.version}")

    def info(self) -> TargetInfo:
        ident = self.identity
        library = ident.library if ident else (self.profile.library if self.profile else self.spec)
        return TargetInfo(url=f"client:{self.spec}", profile=self.profile_name,
                          protocol=ident.protocol if ident else (self.profile.protocol if self.profile else None),
                          adapter=ident.driver if ident else None, kind="client", library=library,
                          version=(ident.version if ident and ident.version else
                                   self.profile.version if self.profile else None),
                          broker=self.broker)


def resolve_client(spec: str | None, profile_name: str | None, broker: str | None = None) -> ClientTarget:
    """The client target: ``spec`` (default: the reference client), its profile (named, else the bundled
    profile of that client, else none) and the broker of brokers/ it is to run against (None: the
    reference broker). :class:`ProfileError` on a bad profile or broker name."""
    from ackspec.brokers import broker as broker_info  # noqa: PLC0415
    from ackspec.errors import AckspecError  # noqa: PLC0415
    from ackspec.spec import SpecError  # noqa: PLC0415
    from ackspec.spec.client_profiles import load_client_profile, profile_for_client  # noqa: PLC0415

    spec = spec or DEFAULT_CLIENT
    try:
        expected = broker_info(broker).profile if broker else None
    except AckspecError as exc:
        raise ProfileError(str(exc)) from exc
    name = profile_name or profile_for_client(spec)
    if name is None:
        return ClientTarget(spec, expected_broker=expected)
    try:
        return ClientTarget(spec, load_client_profile(name), expected_broker=expected)
    except SpecError as exc:
        raise ProfileError(str(exc)) from exc


def client_deviations(profile_name: str, broker: str | None) -> list[str]:
    """Requirements the client profile lists as deviations on ``broker`` (none if it cannot be read)."""
    from ackspec.spec import SpecError  # noqa: PLC0415
    from ackspec.spec.client_profiles import load_client_profile  # noqa: PLC0415

    try:
        return [d.requirement for d in load_client_profile(profile_name).deviations_on(broker)]
    except SpecError:
        return []


def classify_client(exc: BaseException | None) -> Outcome:
    """How a client-side test ended: the client's own not-applicable and errors, then as a broker test.

    A :class:`~ackspec.adapters.cut.CutError` the test did not expect is the client
    misbehaving (a failure), except a broken shim (``ShimError``: the process died or never said
    hello), which is an error of the run."""
    from ackspec.adapters.cut import CutError, NotApplicable  # noqa: PLC0415

    if isinstance(exc, NotApplicable):
        return Outcome(OutcomeKind.NOT_APPLICABLE, f"not applicable: {exc}")
    if isinstance(exc, CutError):
        text = str(exc).splitlines()[0] if str(exc) else exc.kind
        kind = OutcomeKind.ERROR if exc.kind == "ShimError" else OutcomeKind.FAILED
        return Outcome(kind, f"the client raised {text}")
    return classify(exc)
