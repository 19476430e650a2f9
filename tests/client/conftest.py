"""Re-use the client-side conformance fixtures (broker, proxy, env, make_cut) in unit tests."""

from ackspec.conformance.client.conftest import amqp_proxy, broker, env, make_cut, proxy  # noqa: F401
