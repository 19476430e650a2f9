"""Operation histories: the record format, the recorder adapters write them with, and the checks over one
history (``anomalies``: what a check finds, ``facts``: a history indexed once, ``rules``: one function per
rule, ``checks``: the rules run in one process; the Spark job in :mod:`ackspec.pipeline` runs the same rules)."""

from ackspec.history.record import (
    INTENT_KEY,
    PRODUCER_HEADER,
    SCHEMA_VERSION,
    SEQ_HEADER,
    HistoryFormatError,
    Intent,
    Op,
    Record,
    RecordType,
)
from ackspec.history.recorder import Pending, Recorder

__all__ = [
    "INTENT_KEY",
    "PRODUCER_HEADER",
    "SCHEMA_VERSION",
    "SEQ_HEADER",
    "HistoryFormatError",
    "Intent",
    "Op",
    "Pending",
    "Record",
    "RecordType",
    "Recorder",
]
