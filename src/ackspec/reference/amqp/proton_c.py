"""proton's C API, as python-qpid-proton's private cffi module ``cproton_ffi`` exposes it: imported here only.

Why the private module: the listener's per-message work (reading a transfer, answering it, sending a
delivery) through proton's public wrapper objects costs several Python objects per message; calling the C
functions on the raw pointers is what lets one Python thread keep up with the real brokers
(docs/benchmark.md). Why here only: ``cproton_ffi`` is not a public API, so it may change in any release;
this module checks, once, that every function and constant the broker, the bench client and the
benchmarks' floor server use is there, and otherwise stops with one line naming what is missing and the
versions it was tested with (tests/reference/test_proton_c.py fails when a name is used unlisted, or when
``cproton_ffi`` is imported anywhere else).
"""

from __future__ import annotations

from typing import Any, Final

import proton

from ackspec.errors import AckspecError

TESTED_VERSIONS: Final = ("0.39", "0.40")
"""python-qpid-proton versions whose ``cproton_ffi`` this was checked against."""

FUNCTIONS: Final = (
    "pn_collector_peek", "pn_collector_pop", "pn_event_type", "pn_event_delivery", "pn_event_link",
    "pn_delivery_link", "pn_delivery_readable", "pn_delivery_partial", "pn_delivery_pending", "pn_link_recv",
    "pn_link_advance", "pn_delivery_remote_state", "pn_delivery_settled", "pn_delivery_settle",
    "pn_delivery_update", "pn_delivery", "pn_link_send", "pn_link_credit", "pn_link_get_drain", "pn_link_flow",
    "pn_link_state", "pn_link_current",
    # the benchmarks' floor server (benchmarks/amqp_floor.py) polls endpoints and drives the transport itself
    "pn_connection_state", "pn_session_head", "pn_session_open", "pn_session_close", "pn_link_head",
    "pn_link_close", "pn_transport_push", "pn_transport_capacity", "pn_transport_pending", "pn_transport_peek",
    "pn_transport_pop",
)
"""The C functions used (pn_*: qpid-proton's ``proton/*.h``)."""

EVENTS: Final = (
    "PN_DELIVERY", "PN_LINK_FLOW", "PN_CONNECTION_REMOTE_OPEN", "PN_SESSION_REMOTE_OPEN", "PN_LINK_REMOTE_OPEN",
    "PN_LINK_REMOTE_CLOSE", "PN_LINK_REMOTE_DETACH", "PN_SESSION_REMOTE_CLOSE", "PN_CONNECTION_REMOTE_CLOSE",
    # delivery state and endpoint state constants (the bench client and the floor server)
    "PN_ACCEPTED", "PN_LOCAL_UNINIT", "PN_LOCAL_ACTIVE", "PN_REMOTE_ACTIVE", "PN_REMOTE_CLOSED",
)
"""The constants used (event types, delivery and endpoint states)."""

VERSION: Final = f"{proton.VERSION_MAJOR}.{proton.VERSION_MINOR}"


class ProtonApiError(AckspecError):
    """This python-qpid-proton does not offer the C API the AMQP listener is written against."""


def _load() -> tuple[Any, Any]:
    tested = ", ".join(TESTED_VERSIONS)
    try:
        from cproton_ffi import ffi, lib  # type: ignore[import-not-found]  # noqa: PLC0415 - the one import
    except ImportError as exc:
        raise ProtonApiError(f"python-qpid-proton {VERSION} has no cffi module cproton_ffi, which the AMQP "
                             f"listener calls proton's C API through (tested with {tested}): {exc}") from exc
    missing = [name for name in (*FUNCTIONS, *EVENTS) if not hasattr(lib, name)]
    if missing:
        raise ProtonApiError(f"python-qpid-proton {VERSION}'s cffi module lacks {', '.join(missing)}, which the "
                             f"AMQP listener calls (tested with {tested}): install one of those versions")
    return ffi, lib


ffi, lib = _load()
"""cffi's ``ffi`` (buffers, pointers) and ``lib`` (the C functions and constants)."""
