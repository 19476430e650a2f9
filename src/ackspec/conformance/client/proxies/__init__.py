"""The confirmation proxies of the client-side suite: between a client under test and a broker, they hold and
release (or reject) the broker's answers to sends, so a rule such as "the send has not returned while its
confirmation is held" is seen, not timed.

- :mod:`.stomp`: :class:`~.stomp.ConfirmationProxy` over STOMP (holds RECEIPTs) and :class:`~.stomp.Gate`.
- :mod:`.amqp`: :class:`~.amqp.AmqpConfirmationProxy`, the same API on AMQP 1.0 dispositions.
"""
