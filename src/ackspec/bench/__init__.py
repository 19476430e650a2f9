"""``ackspec bench``: delivery-guarantee throughput of the reference broker vs real brokers.

Modules: :mod:`.client` (lean single-threaded STOMP load client), :mod:`.scenarios` (what is
measured), :mod:`.targets` (which brokers, and starting the reference broker), :mod:`.runner`
(repetitions and medians), :mod:`.report` (table, ratio, bench.json, bench.png).

The project's own measurement scripts (RTT arithmetic, the pipeline, the AMQP floor, soak) are not part
of the tool: they live in the checkout's ``benchmarks/`` (benchmarks/README.md) and import from here.
"""
