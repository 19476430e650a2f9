"""Append-only journal of the reference broker's durable facts.

See :mod:`.log` for the file, replay, torn tails and the operator's choices about damage,
:mod:`.framing` for how records sit in the file (two versions), :mod:`.recovery` for finding the good
records around damage, and :mod:`.codec` for the record encoding.
"""

from ackspec.reference.journal.codec import decode_record, encode_record
from ackspec.reference.journal.log import Journal, JournalCorruption, ReplayReport

__all__ = ["Journal", "JournalCorruption", "ReplayReport", "decode_record", "encode_record"]
