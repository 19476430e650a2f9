"""A burst of windowed persistent sends, written without waiting, over STOMP or AMQP 1.0.

The suite's usual :meth:`~ackspec.adapters.base.Client.send` waits for each confirmation in turn, so a broker
that confirms a window's messages in batches would only ever be seen confirming one at a time (or on its timer).
A publish window keeps up to N sends outstanding: here they are written back to back and the confirmations
read as they come, into a :class:`~ackspec.conformance.window.Burst` timeline.

* STOMP: a raw connection writes the SEND frames in one go, each persistent with its own ``receipt``; a
  RECEIPT confirms its SEND and every earlier frame of the connection.
* AMQP 1.0: the proton driver writes unsettled transfers as far as the link's credit allows
  (:meth:`~ackspec.adapters.amqp_proton.ProtonClient.send_burst`); each outcome settles its own transfer.

Every send is recorded in the test's history (ok once confirmed, info when no confirmation came), so the
history checks count a confirmed message that is later missing as lost. A connection that ends before every
send was answered makes the burst indeterminate: unanswered sends may or may not have arrived.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ackspec.adapters.amqp_proton import ProtonClient
from ackspec.adapters.base import ConnectionLost, Indeterminate, NotSupported
from ackspec.conformance.harness import Harness
from ackspec.conformance.rawstomp import RawStomp, frame
from ackspec.conformance.window import WINDOW_HEADER, Burst, Confirmation, covered_prefix
from ackspec.history import PRODUCER_HEADER, SEQ_HEADER, Op, Pending

PRODUCER = "window"


def publish_burst(harness: Harness, destination: str, seqs: Sequence[int], *, window: int,
                  wait: float) -> Burst:
    """Send ``seqs`` as one burst of a window of ``window``; read confirmations for up to ``wait`` seconds
    after the last write (less once all came)."""
    process = f"window-{destination.rsplit('.', 2)[-2]}-{seqs[0] if seqs else 0}"
    pending = [harness.recorder.invoke(Op.SEND, process, destination=destination, seq=s, producer=PRODUCER,
                                       persistent=True) for s in seqs]
    headers = [{SEQ_HEADER: str(s), PRODUCER_HEADER: PRODUCER, WINDOW_HEADER: str(window)} for s in seqs]
    if harness.adapter.protocol == "stomp":
        burst, lost = _stomp_burst(harness, destination, headers, wait)
    elif harness.adapter.protocol == "amqp":
        burst, lost = _amqp_burst(harness, process, destination, headers, wait)
    else:
        raise NotSupported("publish-window", f"{harness.adapter.name} speaks neither STOMP nor AMQP 1.0")
    _complete(pending, burst, lost)
    if lost is not None and burst.confirmed < len(seqs):
        raise Indeterminate(f"the connection ended with {len(seqs) - burst.confirmed} of {len(seqs)} windowed "
                            f"sends unanswered ({lost}): they may or may not have arrived")
    return burst


def _complete(pending: list[Pending], burst: Burst, lost: str | None) -> None:
    for index, record in enumerate(pending):
        if index < burst.confirmed:
            record.ok()
        else:
            record.info(error=lost or "no confirmation within the wait")


def _stomp_burst(harness: Harness, destination: str, headers: list[dict[str, str]],
                 wait: float) -> tuple[Burst, str | None]:
    raw = harness.raw_connected()
    persistent = harness.settings.persistent_header
    frames = [frame("SEND", {"destination": destination, persistent: "true", "receipt": f"w-{index}",
                             "content-type": "text/plain", **extra}, f"m{extra[SEQ_HEADER]}".encode())
              for index, extra in enumerate(headers)]
    written = time.monotonic()
    raw.send(b"".join(frames))
    confirmations, lost = _stomp_receipts(raw, len(frames), written + wait)
    raw.close()
    return Burst((written,) * len(frames), tuple(confirmations)), lost


def _stomp_receipts(raw: RawStomp, count: int, until: float) -> tuple[list[Confirmation], str | None]:
    """RECEIPTs of the burst as they come; each covers its SEND and all before it."""
    confirmations: list[Confirmation] = []
    covered = 0
    while covered < count:
        got = raw.read_frame(max(0.0, until - time.monotonic()))
        now = time.monotonic()
        if got is None:
            return confirmations, "connection closed" if raw.eof else None
        if got.command == "ERROR":
            return confirmations, f"ERROR {got.headers.get('message', '')}".strip()
        receipt = got.headers.get("receipt-id", "")
        if got.command == "RECEIPT" and receipt.startswith("w-") and receipt[2:].isdigit():
            index = int(receipt[2:])
            if index + 1 > covered:
                covered = index + 1
                confirmations.append(Confirmation(now, covered))
    return confirmations, None


def _amqp_burst(harness: Harness, process: str, destination: str, headers: list[dict[str, str]],
                wait: float) -> tuple[Burst, str | None]:
    client = harness.client(process)
    if not isinstance(client, ProtonClient):
        raise NotSupported("amqp", f"{harness.adapter.name} is not the proton driver")
    messages = [(f"m{extra[SEQ_HEADER]}".encode(), extra) for extra in headers]
    try:
        answers = client.send_burst(destination, messages, persistent=True, until=time.monotonic() + wait)
    except (ConnectionLost, Indeterminate) as exc:
        return Burst((), ()), str(exc)
    answered = [False] * len(answers.written)
    confirmations: list[Confirmation] = []
    for index in sorted(range(len(answered)), key=lambda i: answers.answered[i] or float("inf")):
        at = answers.answered[index]
        if at is None:
            break
        answered[index] = True
        covered = covered_prefix(answered)
        if covered > (confirmations[-1].covered if confirmations else 0):
            confirmations.append(Confirmation(at, covered))
    return Burst(tuple(answers.written), tuple(confirmations)), None
