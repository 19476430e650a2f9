"""The system under test of one run: URL, profile, driver settings, and the embedded broker.

With no URL the bundled reference broker is started in-process (the embedded
default) and driven through :class:`ackspec.adapters.reference.ReferenceAdapter`,
which can also restart it and inject faults. With a URL the driver is chosen by
scheme (:mod:`ackspec.adapters.registry`).

The profile (``--profile NAME``, data in ``spec/targets/NAME.yaml``)
supplies the driver settings and the known deviations, each with a reason.
"""

from __future__ import annotations

import contextlib
import fnmatch
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ackspec import spec
from ackspec.adapters.base import Adapter, Capability
from ackspec.adapters.registry import UnknownScheme, factory_for, open_adapter
from ackspec.adapters.settings import TargetSettings
from ackspec.conformance.restart import RestartCommand
from ackspec.conformance.verdicts import TargetUnavailable
from ackspec.history import Recorder
from ackspec.spec.profile_files import observed_in

EMBEDDED_URL = "reference://embedded"
EMBEDDED_AMQP_URL = "reference+amqp://embedded"
"""The embedded reference broker driven over AMQP 1.0 by the proton driver (restart and faults included)."""
EMBEDDED_PREFIXES = ("reference:", "embedded:", "reference+amqp:", "embedded+amqp:")
DEFAULT_PORTS = {"stomp": 61613, "amqp": 5672}


class ProfileError(ValueError):
    """A profile that does not exist or cannot be read: one readable line."""


def available_profiles() -> list[str]:
    """The names of the bundled target profiles (``spec/targets/``)."""
    return spec.available_profiles()


def load_profile(name: str) -> dict[str, Any]:
    """The profile's data, validated by the spec loader (schema, capabilities, requirement IDs)."""
    try:
        return dict(spec.load_profile(name).raw)
    except spec.SpecError as exc:
        raise ProfileError(f"profile {name!r}: {exc}") from exc


WEBSOCKET_SCOPE = "stomp-ws"
"""The deviation scope of STOMP over WebSocket: what a broker's WebSocket listener does differently."""


def scope_protocol(protocol: str | None, url: str) -> str | None:
    """The protocol a deviation's ``protocols`` scope is matched against: ``stomp-ws`` for a STOMP target
    reached over WebSocket (``ws://``, ``wss://``), else the protocol itself."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if protocol == "stomp" and scheme in ("ws", "wss"):
        return WEBSOCKET_SCOPE
    return protocol or None


@dataclass(frozen=True, slots=True)
class KnownDeviation:
    requirement: str
    reason: str
    test: str | None = None  # fnmatch pattern on the pytest node id the deviation is limited to
    protocols: tuple[str, ...] = ()  # protocols the deviation is limited to (empty: all)
    intermittent: bool = False  # shows in some runs only: a run where it held is a pass, not stale
    check: str | None = None  # glob the failure's message must match (what was observed)

    def covers_protocol(self, protocol: str | None) -> bool:
        """Whether the ``protocols`` scope takes in ``protocol`` (a :func:`scope_protocol`): ``stomp``
        covers STOMP over TCP and over WebSocket (the same STOMP behaviour), ``stomp-ws`` only the latter."""
        if not self.protocols or not protocol:
            return True
        return protocol in self.protocols or (protocol == WEBSOCKET_SCOPE and "stomp" in self.protocols)

    def applies_to(self, nodeid: str, protocol: str | None = None) -> bool:
        if not self.covers_protocol(protocol):
            return False
        if not self.test:
            return True
        return fnmatch.fnmatch(nodeid, self.test) or fnmatch.fnmatch(nodeid, f"*{self.test}*")

    def excuses(self, message: str) -> bool:
        """Whether a failure with this message is the behaviour the deviation documents: ``check`` found
        anywhere in it, ``*`` standing for any text (every other character, brackets too, is literal)."""
        return observed_in(self.check, message)


def deviations_of(profile: Mapping[str, Any] | None) -> list[KnownDeviation]:
    """The profile's ``deviations``, as the spec loader validated them: a list of entries, each naming a
    requirement, with a reason and the scope it documents."""
    if not profile:
        return []
    return [KnownDeviation(str(item["requirement"]), str(item.get("reason", "")), item.get("test"),
                           tuple(str(p) for p in item.get("protocols") or ()), bool(item.get("intermittent", False)),
                           item.get("check"))
            for item in profile.get("deviations") or ()]


def probe(url: str, timeout: float = 2.0) -> None:
    """Raise :class:`TargetUnavailable` with one clear line unless something accepts TCP at ``url``."""
    if url.startswith(EMBEDDED_PREFIXES):
        return  # started in-process, nothing to probe
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[-1]
    host = parts.hostname or "127.0.0.1"
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError as exc:
        raise TargetUnavailable(f"bad port in target URL {url}") from exc
    if port is None:
        return
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as exc:
        raise TargetUnavailable(f"cannot resolve host {host!r} of {url} ({exc.strerror or exc})") from exc
    except OSError as exc:
        reason = "nothing listening" if isinstance(exc, ConnectionRefusedError) else exc.strerror or str(exc)
        raise TargetUnavailable(f"{reason or type(exc).__name__} at {url}") from exc


@dataclass
class Target:
    """The resolved target of a session."""

    url: str
    profile_name: str | None
    profile: dict[str, Any] | None
    settings: TargetSettings
    deviations: list[KnownDeviation]
    broker: Any = None  # EmbeddedBroker when embedded
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    adapter_name: str = ""
    protocol: str = ""
    restart: RestartCommand | None = None  # how to restart a real target (--restart-command)

    @property
    def deviation_scope(self) -> str | None:
        """What the deviations' ``protocols`` scopes are matched against (:func:`scope_protocol`)."""
        return scope_protocol(self.protocol, self.url)

    def deviations_for(self, nodeid: str) -> dict[str, str]:
        """``{requirement: reason}`` of the deviations that apply to one test."""
        return {d.requirement: d.reason for d in self.deviations if d.applies_to(nodeid, self.deviation_scope)}

    def excuse_for(self, nodeid: str) -> Callable[[str, str], str | None]:
        """``excuse(requirement, message)``: the reason of the deviation that documents this failure of
        the requirement in this test, or None when none does (then it stays a failure)."""
        scoped = [d for d in self.deviations if d.applies_to(nodeid, self.deviation_scope)]

        def excuse(requirement: str, message: str) -> str | None:
            return next((d.reason for d in scoped if d.requirement == requirement and d.excuses(message)), None)

        return excuse

    def intermittent_for(self, nodeid: str) -> frozenset[str]:
        """Requirements whose deviation for this test shows in some runs only."""
        return frozenset(d.requirement for d in self.deviations
                         if d.intermittent and d.applies_to(nodeid, self.deviation_scope))

    @property
    def embedded(self) -> bool:
        return self.broker is not None

    def make_adapter(self, recorder: Recorder, timeout: float) -> Adapter:
        if self.embedded and self.url == EMBEDDED_AMQP_URL:
            from ackspec.adapters.amqp_proton import ReferenceProtonAdapter  # noqa: PLC0415

            adapter: Adapter = ReferenceProtonAdapter(self.url, recorder, timeout=timeout, settings=self.settings,
                                                      broker=self.broker)
        elif self.embedded:
            from ackspec.adapters.reference import ReferenceAdapter  # noqa: PLC0415

            adapter = ReferenceAdapter(self.url, recorder, timeout=timeout, settings=self.settings,
                                                broker=self.broker)
        else:
            adapter = open_adapter(self.url, recorder, timeout=timeout, settings=self.settings)
        self.adapter_name, self.protocol = adapter.name, adapter.protocol
        return adapter

    def close(self) -> None:
        self._stack.close()


def resolve(url: str | None, profile_name: str | None, *, broker_parts: str | None = None,
            broker_options: Mapping[str, Any] | None = None, restart_command: str | None = None) -> Target:
    """Load the profile, then start the embedded broker (no URL) or probe the URL.

    ``restart_command`` (a real target only: the embedded broker restarts itself) gives the target the
    ``broker-restart`` capability. ``broker_parts`` (``MODULE:NAME``, the embedded broker only): build it
    from those parts (the quality checks' mutants)."""
    if (url is None or url.startswith(EMBEDDED_PREFIXES)) and profile_name is None:
        profile_name = "reference" if "reference" in available_profiles() else None
    profile = load_profile(profile_name) if profile_name else None
    settings = TargetSettings.from_profile(profile)
    deviations = deviations_of(profile)
    if url is None or url.startswith(EMBEDDED_PREFIXES):
        from ackspec.adapters.reference import load_broker_parts, start_embedded  # noqa: PLC0415

        amqp = url is not None and "+amqp:" in url
        options = {**dict(broker_options or {}), **({"amqp": True} if amqp else {})}
        if broker_parts is not None:
            try:
                options["parts"] = load_broker_parts(broker_parts)
            except ValueError as exc:
                raise ProfileError(str(exc)) from exc
        target = Target(EMBEDDED_AMQP_URL if amqp else EMBEDDED_URL, profile_name, profile, settings, deviations)
        target.broker = target._stack.enter_context(start_embedded(**options))
        target.adapter_name, target.protocol = ("proton", "amqp") if amqp else ("reference", "stomp")
        return target
    try:
        factory_for(url)
    except UnknownScheme as exc:
        raise ProfileError(str(exc)) from exc
    probe(url)
    if restart_command is None:
        return Target(url, profile_name, profile, settings, deviations)
    settings = replace(settings, capabilities=settings.capabilities | {Capability.BROKER_RESTART})
    return Target(url, profile_name, profile, settings, deviations, restart=RestartCommand(restart_command, url))
