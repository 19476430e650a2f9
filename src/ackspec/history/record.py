"""One operation record of a history: the shared format of adapters, suite and pipeline.

A history is what a test *did* to a system under test and what it *saw*, written
as a flat sequence of records in the style of Jepsen: every operation is recorded
twice, once when it is invoked and once when it completes. The completion says
whether the operation is known to have happened (``ok``), known not to have
happened (``fail``), or neither (``info``: the connection died before the receipt,
a timeout expired). Indeterminate operations are never counted as pass or fail.

The format is documented in ``docs/history-format.md``; this module is its
executable definition. Records are frozen so a history cannot be edited after
the fact, and serialise to one JSON object per line (JSON lines) or to the
Parquet schema in :mod:`ackspec.pipeline.schema`.

Field meanings (all but ``run``, ``index``, ``type``, ``op``, ``process`` and
``time_ns`` are optional and ``None`` when they do not apply):

``run``           id of the ``ackspec run`` that wrote the history
``target``        the target URL or profile name
``test``          pytest node id of the test that ran the operation
``index``         position in the history, strictly increasing per file
``time_ns``       monotonic nanoseconds when the record was written
``type``          ``invoke`` | ``ok`` | ``fail`` | ``info``
``op``            the operation, one of :class:`Op`
``process``       logical client (one connection) that ran it, e.g. ``"c1"``
``session``       session or STOMP connection-level session id
``destination``   queue or topic, e.g. ``/queue/ackspec.1234.q``
``subscription``  subscription id the operation concerns
``producer``      producer id (per-producer ordering is checked per this)
``seq``           our sequence number of the message, carried in a header
                  (``ackspec-seq``) so it survives brokers that rewrite ids
``message_id``    the broker's message id, as seen
``ack_id``        the id to acknowledge with (STOMP ``ack`` header, AMQP tag)
``ack_mode``      ``auto`` | ``client`` | ``client-individual`` | ``dups-ok`` |
                  ``transacted`` | AMQP settle modes ``settled``/``unsettled``
``transaction``   transaction id or ``None``
``persistent``    durability of the message sent
``redelivered``   redelivery flag seen on a delivery
``delivery_count`` delivery count seen (JMSXDeliveryCount semantics: 1 = first)
``outcome``       for AMQP dispositions/NACKs: ``accepted`` ``rejected``
                  ``released`` ``modified``; for STOMP NACK ``nack``
``limit``         the bound in force: prefetch, credit or publish window size
``error``         error text for ``fail``/``info``
``value``         free-form JSON-compatible extra data (kept small)

Intent records (``op`` ``expect``, added without a version bump: older histories
simply have none) are not operations on the target but what the test *meant*:
``value`` ``{"expect": "delivered"}`` says every message the test sent is meant to
be consumed by its end, ``{"expect": "left"}`` or ``{"expect": "dropped"}`` that
the messages in the record's scope (``destination``, ``producer``, ``seq``; an
absent field matches any) are left on the broker or dropped on purpose. The loss
check reads them (see :class:`Intent` and ``docs/history-format.md``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 1
"""Bumped whenever a field changes meaning. Readers refuse unknown versions."""

SEQ_HEADER = "ackspec-seq"
"""Header (STOMP) or application property (AMQP) that carries our sequence number."""

PRODUCER_HEADER = "ackspec-producer"
"""Header that carries the producer id, so order can be checked per producer."""


class RecordType(StrEnum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"  # indeterminate: may or may not have taken effect


class Op(StrEnum):
    CONNECT = "connect"
    DISCONNECT = "disconnect"  # clean
    CRASH = "crash"  # abrupt socket loss caused by the test
    SUBSCRIBE = "subscribe"
    UNSUBSCRIBE = "unsubscribe"
    SEND = "send"
    RECEIVE = "receive"  # ok completion carries one delivery; ok with seq None = timed out empty
    ACK = "ack"
    NACK = "nack"  # STOMP NACK or AMQP released/modified/rejected (see ``outcome``)
    BEGIN = "begin"
    COMMIT = "commit"
    ABORT = "abort"  # STOMP ABORT, JMS rollback, AMQP discharge(fail=True)
    RECOVER = "recover"  # JMS Session.recover
    CONFIRM = "confirm"  # asynchronous send completion (JMS 7.3 callback, publish-window ack)
    FLOW = "flow"  # credit / prefetch / window granted
    EXPECT = "expect"  # the test's intent about its messages (see Intent): a declaration, not an operation


class Intent(StrEnum):
    """What an ``expect`` record declares about the messages in its scope (``value["expect"]``).

    A message sent in a history that declares ``delivered`` for it must have been consumed
    by the end of the test, so a confirmed send that never arrived is a loss. ``left`` and
    ``dropped`` exempt messages the test leaves on the broker or drops on purpose (an
    undrained dead-letter queue, credit never granted) and win over ``delivered``.
    """

    DELIVERED = "delivered"  # every message in scope is meant to be consumed by the end of the test
    LEFT = "left"  # deliberately left on the broker (never consumed by the test)
    DROPPED = "dropped"  # deliberately dropped: NACKed to an undrained dead-letter queue, expired, discarded


INTENT_KEY = "expect"
"""Key of ``value`` in an ``expect`` record that holds the :class:`Intent`."""


@dataclass(frozen=True, slots=True)
class Record:
    """One line of a history. See the module docstring for each field."""

    run: str
    index: int
    time_ns: int
    type: RecordType
    op: Op
    process: str
    target: str | None = None
    test: str | None = None
    session: str | None = None
    destination: str | None = None
    subscription: str | None = None
    producer: str | None = None
    seq: int | None = None
    message_id: str | None = None
    ack_id: str | None = None
    ack_mode: str | None = None
    transaction: str | None = None
    persistent: bool | None = None
    redelivered: bool | None = None
    delivery_count: int | None = None
    outcome: str | None = None
    limit: int | None = None
    error: str | None = None
    value: Any = None

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        data["v"] = SCHEMA_VERSION
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Record:
        """Build a record from a decoded JSON object, refusing unknown schema versions."""
        version = data.get("v", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise HistoryFormatError(f"history schema version {version!r} is not supported (expected {SCHEMA_VERSION})")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known - {"v"}
        if unknown:
            raise HistoryFormatError(f"unknown history fields: {', '.join(sorted(unknown))}")
        try:
            kwargs = {k: v for k, v in data.items() if k != "v"}
            kwargs["type"] = RecordType(kwargs["type"])
            kwargs["op"] = Op(kwargs["op"])
            return cls(**kwargs)
        except (KeyError, ValueError, TypeError) as exc:
            raise HistoryFormatError(f"malformed history record: {exc}") from exc

    @classmethod
    def from_json(cls, line: str) -> Record:
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HistoryFormatError(f"history line is not JSON: {exc.msg} at column {exc.colno}") from exc
        if not isinstance(data, dict):
            raise HistoryFormatError("history line is not a JSON object")
        return cls.from_mapping(data)


class HistoryFormatError(ValueError):
    """A history file that cannot be read; the message is one readable line."""
