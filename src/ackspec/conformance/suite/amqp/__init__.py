"""AMQP 1.0-only conformance tests: settlement modes, outcomes, delivery-count, link credit and
drain, transactions through the coordinator, durable messages across a restart.

They run through the proton driver (``--target amqp://host:port`` or, with restart and
fault injection, ``--target reference+amqp://embedded``) and are not-applicable over any
other protocol. The generic families (``suite/test_*.py``) run over AMQP too, through the
driver's mapping (docs/amqp-mapping.md).
"""
