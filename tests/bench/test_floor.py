"""The floor server of ``benchmarks/stomp_cpu.py`` (a STOMP server with no broker logic) as a bench target.

``ackspec bench --targets floor=stomp://...`` (also ``--paired``) runs a row's session against it: SENDs with
receipts, then the drain (an ``ack:auto`` SUBSCRIBE taking back what was sent, UNSUBSCRIBE with a receipt), then
DISCONNECT with a receipt. The floor once closed on DISCONNECT without its receipt and never answered the drain,
so those runs ended in an error; this checks each step is answered, within the client's timeout."""

from __future__ import annotations

from ackspec.bench.client import LeanStompClient, send_frame

from .scripts import load_script

SENT = 25




def test_the_floor_answers_a_bench_session_from_its_sends_to_its_disconnect() -> None:
    stomp_cpu = load_script("stomp_cpu")
    with stomp_cpu.server("floor-asyncio") as (endpoint, _process):
        client = LeanStompClient(endpoint, timeout=5.0)
        try:
            for i in range(SENT):
                client.send_raw(send_frame("/queue/floor", stomp_cpu.BODY, receipt=str(i)))
                client.wait_receipt(str(i))
            client.send_raw(b"SUBSCRIBE\ndestination:/queue/floor\nid:drain\nack:auto\n\n\x00")
            messages = [client.next_frame() for _ in range(SENT)]
            assert {(m.command, m.get("subscription"), m.get("destination")) for m in messages} == {
                ("MESSAGE", "drain", "/queue/floor")}
            client.send_raw(b"UNSUBSCRIBE\nid:drain\nreceipt:unsub\n\n\x00")
            client.wait_receipt("unsub")
            client.send_raw(b"DISCONNECT\nreceipt:bye\n\n\x00")
            client.wait_receipt("bye")
        finally:
            client.sock.close()
