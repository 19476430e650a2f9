"""Journal: record round trip, replay, torn and corrupt tails dropped with a log line."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.reference.broker import Committed, DeadLettered, Message, Removed, Stored
from ackspec.reference.broker.records import DurableRemoved, DurableSubscribed, Record, StoredCopy
from ackspec.reference.broker.typed import Typed
from ackspec.reference.journal import Journal, JournalCorruption, decode_record, encode_record
from ackspec.reference.journal.log import PREALLOCATE_BYTES, ReplayReport

from ._req import requirement

texts = st.text(max_size=10)
property_values = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | texts
typed = st.none() | st.builds(
    Typed, st.binary(max_size=30), st.lists(st.tuples(texts, property_values), max_size=3).map(tuple),
    st.integers(0, 255), st.integers(0, 2**32 - 1), st.integers(0, 2**63), st.integers(0, 2**63), texts,
    st.lists(st.tuples(texts, texts), max_size=2).map(tuple))
messages = st.builds(Message, texts, texts, st.binary(max_size=30), st.lists(st.tuples(texts, texts), max_size=3)
                     .map(tuple), st.booleans(), texts, st.integers(0, 2**63), typed)
records = st.one_of(
    st.builds(Stored, messages),
    st.builds(Removed, texts),
    st.builds(DeadLettered, texts, texts, texts),
    st.builds(Committed, st.lists(messages, max_size=3).map(tuple), st.lists(texts, max_size=3).map(tuple),
              st.lists(st.builds(StoredCopy, texts, texts, messages), max_size=2).map(tuple)),
    st.builds(StoredCopy, texts, texts, messages),
    st.builds(DurableSubscribed, texts, texts, texts, texts, st.booleans()),
    st.builds(DurableRemoved, texts, texts),
)


@given(records)
def test_record_round_trip(record: Record) -> None:
    assert decode_record(encode_record(record)) == record


def _u32_str(s: str) -> bytes:
    data = s.encode()
    return len(data).to_bytes(4, "big") + data


@given(texts, texts, texts, st.one_of(st.just(""), texts), st.booleans())
def test_durable_subscription_layout_u_without_selector_or_no_local_and_v_with_either(
        client_id: str, name: str, destination: str, selector: str, no_local: bool) -> None:
    """A durable subscription with neither a selector nor noLocal keeps the ``U`` layout of journals written
    before them (three strings), so they still replay; one with either is ``V``: the same + the selector +
    a noLocal byte."""
    record = DurableSubscribed(client_id, name, destination, selector, no_local)
    payload = encode_record(record)
    fields = _u32_str(client_id) + _u32_str(name) + _u32_str(destination)
    if selector or no_local:
        assert payload == b"V" + fields + _u32_str(selector) + (b"\x01" if no_local else b"\x00")
    else:
        assert payload == b"U" + fields
    assert decode_record(payload) == record


def test_durable_subscription_records_through_a_journal_file(tmp_path: Path) -> None:
    recs: list[Record] = [DurableSubscribed("c", "plain", "/topic/t"),
                          DurableSubscribed("c", "reds", "/topic/t", "colour = 'red'"),
                          DurableSubscribed("c", "unicode", "/topic/t", "name = 'Zoë' AND n > 1"),
                          DurableSubscribed("c", "mine-not", "/topic/t", "", True)]
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append(recs)
    j.close()
    assert Journal(tmp_path).replay()[0] == recs


def _msg(i: int) -> Message:
    return Message(f"m{i}", "/queue/a", b"body%d" % i, (("k", "v"),), True, "p", i)


def test_append_replay(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    assert j.replay()[0] == []
    j.open()
    recs: list[Record] = [Stored(_msg(1)), Stored(_msg(2)), Removed("m1")]
    j.append(recs)
    j.sync()
    j.close()
    got, report = Journal(tmp_path).replay()
    assert got == recs and report.dropped_bytes == 0


@requirement("ARTEMIS-JOURNAL-SYNC-NON-TRANSACTIONAL")
@pytest.mark.parametrize("cut", [1, 3, 7, 12])
def test_torn_last_record_dropped(tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture) -> None:
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Stored(_msg(1)), Stored(_msg(2))])
    j.close()
    data = j.path.read_bytes()
    j.path.write_bytes(data[:-cut])
    with caplog.at_level(logging.WARNING, logger="ackspec.reference.journal"):
        got, report = Journal(tmp_path).replay()
    assert got == [Stored(_msg(1))]
    assert report.dropped_bytes > 0 and "dropped" in caplog.text
    j2 = Journal(tmp_path)  # the file was truncated: appending continues cleanly
    assert j2.replay()[0] == [Stored(_msg(1))]
    j2.open()
    j2.append([Stored(_msg(3))])
    j2.close()
    assert Journal(tmp_path).replay()[0] == [Stored(_msg(1)), Stored(_msg(3))]


def test_corrupt_crc_detected(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Stored(_msg(1)), Stored(_msg(2))])
    j.close()
    data = bytearray(j.path.read_bytes())
    data[-3] ^= 0xFF
    j.path.write_bytes(bytes(data))
    got, report = Journal(tmp_path).replay()
    assert got == [Stored(_msg(1))] and report.reason == "CRC mismatch"


def test_not_a_journal(tmp_path: Path) -> None:
    (tmp_path / "journal.dat").write_bytes(b"garbage-garbage")
    with pytest.raises(JournalCorruption):
        Journal(tmp_path).replay()


def test_rewrite_compacts(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Stored(_msg(i)) for i in range(10)] + [Removed(f"m{i}") for i in range(9)])
    j.rewrite([Stored(_msg(9))])
    j.append([Removed("m9")])
    j.close()
    assert Journal(tmp_path).replay()[0] == [Stored(_msg(9)), Removed("m9")]


def test_records_go_into_preallocated_space_and_a_clean_close_cuts_the_rest(tmp_path: Path) -> None:
    """The file is allocated ahead of the records (an fdatasync then need not commit a new file size), and
    a clean close leaves exactly the records: what a reader of the file saw before preallocation."""
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Stored(_msg(1)), Stored(_msg(2))])
    j.sync()
    assert j.path.stat().st_size >= j.size + PREALLOCATE_BYTES // 2 and j.allocated > j.size
    j.close()
    assert j.path.stat().st_size == j.size
    assert Journal(tmp_path).replay() == ([Stored(_msg(1)), Stored(_msg(2))], ReplayReport(2, j.size, 0))


def test_preallocated_zeros_after_an_unclean_stop_are_cut_quietly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A process that dies leaves the unused preallocated space, zeros, after its last record. That is
    expected, not damage: replay keeps every record, cuts the zeros and says so in one INFO line naming them,
    no WARNING (the cut is still not silent), and appending continues right after the last record."""
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Stored(_msg(1)), Removed("m1")])
    j.sync()
    end = j.size
    unclean = j.path.read_bytes()  # the file as a killed process leaves it (its descriptor never closed)
    j.close()
    j.path.write_bytes(unclean)
    assert len(unclean) > end and not any(unclean[end:])
    with caplog.at_level(logging.DEBUG, logger="ackspec.reference.journal"):
        got, report = Journal(tmp_path).replay()
    assert got == [Stored(_msg(1)), Removed("m1")]
    assert report.dropped_bytes == len(unclean) - end and report.reason.startswith("zero bytes")
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [(logging.INFO, f"journal {j.path}: cut {len(unclean) - end} byte(s) of unused preallocated "
                                   f"space (zeros) after the last record, at offset {end}")]
    assert j.path.stat().st_size == end
    j2 = Journal(tmp_path)
    j2.replay()
    j2.open()
    j2.append([Stored(_msg(3))])
    j2.close()
    assert Journal(tmp_path).replay()[0] == [Stored(_msg(1)), Removed("m1"), Stored(_msg(3))]


def test_a_torn_record_before_the_preallocated_zeros_still_warns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A crash in the middle of writing a record leaves its first bytes, then the unused zeros: not only
    zeros, so the cut is a torn tail and gets its WARNING line; the records before it are all kept."""
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Stored(_msg(1))])
    j.sync()
    kept = j.size
    j.append([Stored(_msg(2))])
    j.sync()
    unclean = bytearray(j.path.read_bytes())
    j.close()
    unclean[kept + (j.size - kept) // 2 : j.size] = bytes(j.size - kept - (j.size - kept) // 2)  # half written
    j.path.write_bytes(bytes(unclean))
    assert any(unclean[kept:]) and not any(unclean[j.size:])
    with caplog.at_level(logging.DEBUG, logger="ackspec.reference.journal"):
        got, report = Journal(tmp_path).replay()
    assert got == [Stored(_msg(1))]
    assert report.dropped_bytes == len(unclean) - kept and not report.reason.startswith("zero bytes")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert f"torn tail at offset {kept}" in caplog.text and j.path.stat().st_size == kept


def test_a_file_system_that_refuses_to_preallocate_gets_plain_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(fd: int, offset: int, length: int) -> None:
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", refuse)
    j = Journal(tmp_path)
    j.replay()
    j.open()
    for i in range(3):
        j.append([Stored(_msg(i))])
        assert j.path.stat().st_size == j.size == j.allocated
    j.close()
    assert Journal(tmp_path).replay()[0] == [Stored(_msg(i)) for i in range(3)]
