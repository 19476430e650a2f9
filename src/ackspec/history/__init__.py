"""Operation histories: the record format and the recorder adapters write them with."""

from ackspec.history.record import (
    PRODUCER_HEADER,
    SCHEMA_VERSION,
    SEQ_HEADER,
    HistoryFormatError,
    Op,
    Record,
    RecordType,
)
from ackspec.history.recorder import Pending, Recorder

__all__ = [
    "PRODUCER_HEADER",
    "SCHEMA_VERSION",
    "SEQ_HEADER",
    "HistoryFormatError",
    "Op",
    "Pending",
    "Record",
    "RecordType",
    "Recorder",
]
