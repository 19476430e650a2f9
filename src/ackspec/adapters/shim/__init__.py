"""JSON-lines shim: drive a client library in another process (any language) over stdin/stdout.

The protocol is specified in docs/shim-protocol.md. :mod:`.server` serves it for any
:class:`~ackspec.adapters.cut.ClientUnderTest`; ``python -m ackspec.adapters.shim``
is a shim program wrapping the reference client (the executable example for shim authors).
The test side is :class:`ackspec.adapters.shim.client.ShimCUT`.
"""

PROTOCOL = "ackspec-shim"
VERSION = 1
