"""The catalogue's ``requirement`` marker (unknown IDs fail collection)."""

from ackspec.conformance.markers import requirement

__all__ = ["requirement"]
