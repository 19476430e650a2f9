"""Append-only journal of the reference broker's durable facts.

See :mod:`.log` for the file format, replay and torn-record handling, and
:mod:`.codec` for the record encoding.
"""

from ackspec.reference.journal.codec import decode_record, encode_record
from ackspec.reference.journal.log import Journal, JournalCorruption, ReplayReport

__all__ = ["Journal", "JournalCorruption", "ReplayReport", "decode_record", "encode_record"]
