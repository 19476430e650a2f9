"""TLS for the reference broker's listeners, with the standard library's :mod:`ssl`.

``ackspec broker --tls-cert CERT.pem --tls-key KEY.pem`` makes the STOMP listener ``stomp+ssl://`` and the AMQP
listener ``amqps://`` (asyncio's servers take the context; the sans-IO sessions never see TLS). TLS 1.2 is the
floor. Client certificates are not asked for: clients authenticate with their login (docs/security.md).
"""

from __future__ import annotations

import ssl
from pathlib import Path

from ackspec.errors import AckspecError


def server_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server-side context for ``cert`` (PEM, the chain) and ``key`` (PEM); one clear line when unusable."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except FileNotFoundError as exc:
        raise AckspecError(f"cannot read TLS certificate or key: {exc.filename}: {exc.strerror}") from None
    except (ssl.SSLError, OSError) as exc:
        raise AckspecError(f"unusable TLS certificate {cert} / key {key}: {exc}") from None
    return context
