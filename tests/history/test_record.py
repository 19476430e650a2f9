"""The history record format round-trips and refuses what it cannot read."""

from pathlib import Path

import pytest

from ackspec.history import INTENT_KEY, HistoryFormatError, Intent, Op, Record, Recorder, RecordType


def test_record_round_trips_through_json() -> None:
    record = Record(run="r1", index=3, time_ns=42, type=RecordType.OK, op=Op.SEND, process="c1",
                    destination="/queue/q", seq=7, persistent=True)
    assert Record.from_json(record.to_json()) == record


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"v": 99, "run": "r"}', "version 99"),
        ('{"v": 1, "run": "r", "index": 0, "time_ns": 1, "type": "ok", "op": "send", "process": "c", "bogus": 1}',
         "unknown history fields: bogus"),
        ('{"v": 1, "run": "r", "index": 0, "time_ns": 1, "type": "maybe", "op": "send", "process": "c"}',
         "malformed"),
    ],
)
def test_bad_lines_get_one_readable_error(line: str, fragment: str) -> None:
    with pytest.raises(HistoryFormatError, match=fragment):
        Record.from_json(line)


def test_recorder_pairs_invoke_and_completion(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    recorder = Recorder("r1", target="stomp://x", path=path)
    sent = recorder.invoke(Op.SEND, "c1", destination="/queue/q", seq=1)
    sent.ok(message_id="m-1")
    dangling = recorder.invoke(Op.COMMIT, "c1", transaction="t1")
    recorder.close()
    lines = [Record.from_json(line) for line in path.read_text().splitlines()]
    assert [(r.op, r.type) for r in lines] == [
        (Op.SEND, RecordType.INVOKE), (Op.SEND, RecordType.OK),
        (Op.COMMIT, RecordType.INVOKE), (Op.COMMIT, RecordType.INFO),
    ]
    assert lines[1].seq == 1 and lines[1].message_id == "m-1" and lines[1].destination == "/queue/q"
    assert lines[3].transaction == "t1"
    assert dangling.done
    with pytest.raises(RuntimeError, match="completed twice"):
        sent.ok()


def test_intent_records_round_trip_and_old_lines_still_read() -> None:
    intent = Record(run="r1", index=0, time_ns=1, type=RecordType.OK, op=Op.EXPECT, process="harness",
                    destination="/queue/q", seq=5, value={INTENT_KEY: str(Intent.LEFT), "reason": "no credit"})
    line = intent.to_json()
    assert '"op":"expect"' in line and '"v":1' in line  # same schema version: no bump for intent records
    assert Record.from_json(line) == intent
    old = '{"v": 1, "run": "r", "index": 0, "time_ns": 1, "type": "ok", "op": "send", "process": "c", "seq": 1}'
    assert Record.from_json(old).op is Op.SEND
