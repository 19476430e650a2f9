"""Client-side conformance: tests of client libraries against the fault-injecting reference broker.

Run: ``python -m pytest src/ackspec/conformance/client [--ackspec-client NAME]`` (or
``ACKSPEC_CLIENT=NAME``). Clients: ``reference`` (default), ``stomp.py``, ``proton``,
``shim:<command>`` (any program speaking docs/shim-protocol.md), and whatever third-party
packages register under the ``ackspec.clients`` entry point group.
"""
