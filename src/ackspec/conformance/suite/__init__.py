"""The conformance suite: one module per family, every test citing the requirements it checks.

Run it with ``ackspec run`` or ``pytest --pyargs ackspec.conformance.suite --ackspec-target URL``.
"""
