"""``ackspec bench``: delivery-guarantee throughput of the reference broker vs real brokers.

Modules: :mod:`.client` (lean single-threaded STOMP load client), :mod:`.scenarios` (what is
measured), :mod:`.targets` (which brokers, and starting the reference broker), :mod:`.runner`
(repetitions and medians), :mod:`.report` (table, ratio, bench.json, bench.png).
"""
