"""Operation histories: the record format and the recorder adapters write them with."""

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
