"""Helpers shared by the AMQP-only tests: the proton client, raw AMQP header values, barriers."""

from __future__ import annotations

from ackspec.adapters.amqp_proton import ProtonClient
from ackspec.adapters.base import Delivery, NotSupported
from ackspec.conformance.harness import SENTINEL_HEADER, Harness, seqs

AMQP = "amqp"
"""The pseudo-capability an AMQP-only test needs: a target driven over AMQP 1.0."""


def amqp_client(harness: Harness, process: str | None = None) -> ProtonClient:
    """A recorded proton connection; not-applicable unless the target is driven over AMQP 1.0."""
    if harness.adapter.protocol != AMQP:
        raise NotSupported(AMQP, f"{harness.adapter.name} does not speak AMQP 1.0")
    client = harness.client(process)
    if not isinstance(client, ProtonClient):
        raise NotSupported(AMQP, f"{harness.adapter.name} is not the proton driver")
    return client


def live_then_drained(harness: Harness, c: ProtonClient, q: str, sub: str) -> tuple[list[int], list[int]]:
    """Seqs delivered again on the live link ``sub`` up to a barrier, then those a fresh consumer drains
    from ``q`` once ``c`` has disconnected: the two places a settled message must not come back."""
    live = seqs(harness.barrier(c, q, c, sub))
    c.disconnect()
    return live, seqs(harness.drain(q))


def amqp_count(delivery: Delivery) -> int | None:
    """The message header's ``delivery-count`` (0 on a first delivery), as the driver saw it."""
    raw = delivery.headers.get("amqp:delivery-count")
    return int(raw) if raw is not None else None


def first_acquirer(delivery: Delivery) -> bool | None:
    raw = delivery.headers.get("amqp:first-acquirer")
    return None if raw is None else raw == "true"


def settled_on_arrival(delivery: Delivery) -> bool | None:
    raw = delivery.headers.get("amqp:settled")
    return None if raw is None else raw == "true"


def is_sentinel(delivery: Delivery) -> bool:
    return delivery.headers.get(SENTINEL_HEADER) is not None


def unsettled_modes() -> dict[str, str]:
    """Subscribe headers for a link whose credit only the test grants (``flow``/``drain``)."""
    return {"amqp-credit": "manual"}
