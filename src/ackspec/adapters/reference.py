"""The bundled reference broker, in-process, driven over STOMP through stomp.py.

``ackspec run`` with no ``--target`` starts :class:`~ackspec.reference.server.EmbeddedBroker`
on an ephemeral loopback port and tests it through the very same stomp.py
driver used for real brokers, so the reference broker earns no shortcuts. On
top of the STOMP capabilities the harness can restart the broker
(:attr:`Capability.BROKER_RESTART`: receipted persistent messages must survive)
and reach its fault injection (:attr:`Capability.FAULT_INJECTION`). The suite's quality checks run it
built from other parts (:func:`load_broker_parts`), each a deliberately faulty variant.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ackspec.adapters.base import Capability
from ackspec.adapters.embedded import EmbeddedBrokerControls
from ackspec.adapters.settings import TargetSettings
from ackspec.adapters.stomp_py import StompPyAdapter
from ackspec.history import Recorder

REFERENCE_CAPABILITIES: frozenset[Capability] = frozenset({
    Capability.QUEUES, Capability.TOPICS, Capability.ACK_AUTO, Capability.ACK_CLIENT,
    Capability.ACK_CLIENT_INDIVIDUAL, Capability.NACK, Capability.RECEIPTS, Capability.TRANSACTIONS,
    Capability.TRANSACTIONAL_ACK, Capability.PREFETCH, Capability.PERSISTENCE, Capability.REDELIVERED_FLAG,
    Capability.DELIVERY_COUNT, Capability.DEAD_LETTER, Capability.ABRUPT_DISCONNECT, Capability.HEARTBEAT,
    Capability.CUSTOM_HEADERS, Capability.BINARY_BODY, Capability.BROKER_RESTART, Capability.FAULT_INJECTION,
})

REFERENCE_SETTINGS = TargetSettings(
    prefetch_headers=("activemq.prefetchSize",),
    delivery_count_headers=(("delivery-count", 1),),
    dead_letter_queue="/queue/DLQ",
    max_redeliveries=6,
    capabilities=REFERENCE_CAPABILITIES,
)
"""What the reference broker speaks when no profile says otherwise."""


def load_broker_parts(spec: str) -> Any:
    """The :class:`~ackspec.reference.parts.BrokerParts` named ``MODULE:NAME`` (e.g. a mutant of the quality
    checks, ``tests.quality.mutants:lose-message``); :class:`ValueError` with one line if there is none."""
    import importlib  # noqa: PLC0415

    from ackspec.reference.parts import BrokerParts  # noqa: PLC0415

    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"--broker-parts takes MODULE:NAME, not {spec!r}")
    try:
        parts = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--broker-parts {spec}: {exc}") from exc
    if not isinstance(parts, BrokerParts):
        raise ValueError(f"--broker-parts {spec}: not a BrokerParts but {type(parts).__name__}")
    return parts


@contextlib.contextmanager
def start_embedded(*, data_dir: Path | None = None, **options: Any) -> Iterator[Any]:
    """Start the reference broker on an ephemeral port (journal in a temporary directory).

    ``options`` go to :class:`~ackspec.reference.server.EmbeddedBroker` (``parts``: what it is built from).
    """
    from ackspec.reference.server import EmbeddedBroker  # noqa: PLC0415 - heavy import, only when embedded

    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ackspec-ref-")))
        yield stack.enter_context(_construct(EmbeddedBroker, data_dir, options))


def _construct(cls: Any, data_dir: Path, options: dict[str, Any]) -> Any:
    """Build an EmbeddedBroker whatever the name of its journal-directory parameter."""
    import inspect  # noqa: PLC0415

    params = inspect.signature(cls).parameters
    for name in ("data_dir", "journal_dir", "directory", "path"):
        if name in params and name not in options:
            options = {**options, name: data_dir}
            break
    return cls(**options)


class ReferenceAdapter(EmbeddedBrokerControls, StompPyAdapter):
    """stomp.py against the in-process reference broker, plus restart and fault injection."""

    name = "reference"

    def __init__(self, url: str, recorder: Recorder, *, timeout: float = 5.0,
                 settings: TargetSettings | None = None, broker: Any = None) -> None:
        if broker is None:
            raise ValueError("ReferenceAdapter needs a running EmbeddedBroker (use ackspec run with no --target)")
        self.broker = broker
        base = settings if settings is not None else REFERENCE_SETTINGS
        base = replace(base, capabilities=base.capabilities | {Capability.BROKER_RESTART, Capability.FAULT_INJECTION})
        super().__init__(broker.stomp_url, recorder, timeout=timeout, settings=base)
        self.url = url

    def restart_broker(self, *, crash: bool = False) -> None:
        """Restart as :class:`EmbeddedBrokerControls` does, then take the broker's STOMP URL afresh."""
        super().restart_broker(crash=crash)
        self.settings = TargetSettings.from_url(self.broker.stomp_url, self.settings)
