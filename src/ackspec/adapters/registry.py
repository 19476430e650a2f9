"""Which driver handles a target URL: a registry keyed by URL scheme, open to plug-ins.

Built in: ``stomp://`` (stomp.py) and ``reference://`` (the bundled reference
broker, in-process). Other drivers register themselves either in code::

    from ackspec.adapters.registry import register
    register("amqp", make_proton_adapter)

or, from another distribution, through the ``ackspec.adapters`` entry-point
group (``amqp = mypkg.adapter:factory``), loaded on first use. A scheme may
carry a sub-scheme (``jms+stomp://``): the full scheme is tried first, then the
part before ``+``.

A factory takes ``(url, recorder, *, timeout, settings)`` and returns an
:class:`~ackspec.adapters.base.Adapter`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Protocol
from urllib.parse import urlsplit

from ackspec.adapters.base import Adapter
from ackspec.adapters.settings import TargetSettings
from ackspec.history import Recorder

ENTRY_POINT_GROUP = "ackspec.adapters"


class AdapterFactory(Protocol):
    def __call__(self, url: str, recorder: Recorder, *, timeout: float,
                 settings: TargetSettings | None) -> Adapter: ...


class UnknownScheme(LookupError):
    """No driver is registered for a URL scheme."""


_BUILTIN: dict[str, str] = {
    "stomp": "ackspec.adapters.stomp_py:StompPyAdapter",
    "ws": "ackspec.adapters.stomp_py:StompPyAdapter",  # STOMP over WebSocket
    "wss": "ackspec.adapters.stomp_py:StompPyAdapter",
    "amqp": "ackspec.adapters.amqp_proton:ProtonAdapter",
    "amqps": "ackspec.adapters.amqp_proton:ProtonAdapter",
    "reference": "ackspec.adapters.reference:ReferenceAdapter",
    "embedded": "ackspec.adapters.reference:ReferenceAdapter",
}
_FACTORIES: dict[str, AdapterFactory | Callable[..., Adapter]] = {}
_entry_points_loaded: list[bool] = []  # non-empty once the entry points were read


def register(scheme: str, factory: AdapterFactory | Callable[..., Adapter]) -> None:
    """Make ``scheme://`` URLs open with ``factory`` (replacing any earlier registration)."""
    _FACTORIES[scheme.lower()] = factory


def _load_entry_points() -> None:
    if _entry_points_loaded:
        return
    _entry_points_loaded.append(True)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.lower() not in _FACTORIES:
            _FACTORIES[ep.name.lower()] = ep.load()


def _load_builtin(path: str) -> Callable[..., Adapter]:
    module_name, _, attr = path.partition(":")
    factory: Callable[..., Adapter] = getattr(importlib.import_module(module_name), attr)
    return factory


def schemes() -> list[str]:
    """Every scheme that can be opened now."""
    _load_entry_points()
    return sorted(set(_FACTORIES) | set(_BUILTIN))


def factory_for(url: str) -> Callable[..., Adapter]:
    scheme = urlsplit(url).scheme.lower()
    if not scheme:
        raise UnknownScheme(f"target {url!r} has no scheme (expected e.g. stomp://host:port)")
    _load_entry_points()
    for candidate in (scheme, scheme.split("+", 1)[0]):
        if candidate in _FACTORIES:
            return _FACTORIES[candidate]
        if candidate in _BUILTIN:
            return _load_builtin(_BUILTIN[candidate])
    raise UnknownScheme(f"no driver for {scheme}:// targets (known: {', '.join(schemes())})")


def open_adapter(url: str, recorder: Recorder, *, timeout: float = 5.0,
                 settings: TargetSettings | None = None, **extra: Any) -> Adapter:
    """The driver for ``url``, recording into ``recorder``."""
    return factory_for(url)(url, recorder, timeout=timeout, settings=settings, **extra)
