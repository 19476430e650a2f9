"""Which clients can be put under test: built-ins plus the ``ackspec.clients`` entry points.

A third-party client library plugs in by shipping a :class:`~ackspec.adapters.cut.ClientUnderTest`
subclass and declaring it in its own ``pyproject.toml``::

    [project.entry-points."ackspec.clients"]
    mylib = "mylib_ackspec:MyLibCUT"

Then ``pytest --pyargs ackspec.conformance.client --ackspec-client mylib`` runs the
client-side conformance tests through it. ``module:Class`` loads a class that is not
packaged, and ``shim:<command line>`` runs any program that speaks the JSON-lines shim
protocol (docs/shim-protocol.md) instead.
"""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Callable
from importlib.metadata import entry_points

from ackspec.adapters.cut import ClientUnderTest

ENTRY_POINT_GROUP = "ackspec.clients"

BUILTIN: dict[str, str] = {
    "reference": "ackspec.adapters.refclient:RefClientCUT",
    "reference-amqp": "ackspec.adapters.refclient:RefClientAmqpCUT",
    "stomp.py": "ackspec.adapters.stomp_py_cut:StompPyCUT",
    "proton": "ackspec.adapters.proton_cut:ProtonCUT",
    "qpid-jms": "ackspec.adapters.jms_cut:QpidJmsCUT",  # the Java shim (adapters/java)
    "artemis-jms": "ackspec.adapters.jms_cut:ArtemisJmsCUT",
    "activemq-jms": "ackspec.adapters.jms_cut:ActiveMQJmsCUT",
}


class UnknownClient(LookupError):
    pass


def _load(spec: str) -> Callable[[], ClientUnderTest]:
    module, _, attr = spec.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    return obj  # type: ignore[no-any-return]


def available() -> list[str]:
    names = set(BUILTIN)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def factory(name: str) -> Callable[[], ClientUnderTest]:
    """A zero-argument constructor for the client called ``name``."""
    if name.startswith("shim:"):
        from ackspec.adapters.shim.client import ShimCUT  # noqa: PLC0415

        argv = shlex.split(name[len("shim:"):])
        return lambda: ShimCUT(argv)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()  # type: ignore[no-any-return]
    if name in BUILTIN:
        built = _load(BUILTIN[name])
        check = getattr(built, "check_available", None)
        if check is not None:  # e.g. the Java shim's jar: missing -> UnknownClient saying how to build it
            check()
        return built
    if ":" in name:  # "package.module:Class", for clients not installed as packages
        try:
            return _load(name)
        except (ImportError, AttributeError) as exc:
            raise UnknownClient(f"cannot load client {name!r}: {exc}") from exc
    raise UnknownClient(f"unknown client {name!r}; known: {', '.join(available())} or shim:<command>")
