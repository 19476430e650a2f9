"""Exceptions of the reference client, named after their Jakarta Messaging counterparts.

Why a hierarchy: tests (and users) catch ``JMSError`` for "the provider said no" and the
narrower classes for the rules that name them, e.g. 7.3.4 demands an
``IllegalStateException`` when a completion callback closes its own session.
"""

from __future__ import annotations


class JMSError(Exception):
    """Any provider error (``jakarta.jms.JMSException``)."""


class IllegalStateError(JMSError):
    """An operation not allowed in the current state (closed object, or a 7.3.4 self-close)."""


class InvalidDestinationError(JMSError):
    """A destination the provider does not understand."""


class MessageNotAccessibleError(JMSError):
    """The message is in flight asynchronously and may not be read or written (7.3.9)."""


class SendRejectedError(JMSError):
    """The broker refused a send (STOMP ERROR, AMQP rejected outcome, publish-window rejection)."""


class TransactionRolledBackError(JMSError):
    """A commit that the broker refused; the transaction was rolled back."""


class ConnectionLostError(JMSError):
    """The connection went away with work outstanding: its outcome is unknown (indeterminate)."""


class SendTimeoutError(JMSError):
    """A blocking send ran out of time waiting for its confirmation: its outcome is unknown."""


class ControlRefusedError(JMSError):
    """The broker refused a control request (commit, rollback) and kept the connection open."""
