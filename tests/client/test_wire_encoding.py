"""The reference client formats its SEND frames directly (:func:`encode_send`, on every send's path): the
bytes must be exactly what the sans-IO codec makes of the same frame, and parse back to it. It also reads a
plain RECEIPT without the parser (:data:`PLAIN_RECEIPT`): only where the parser would give that very frame."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.client.wire import PLAIN_RECEIPT, encode_send
from ackspec.reference.stomp import Frame, FrameParser, encode

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_names = st.one_of(_text, st.sampled_from(["destination", "receipt", "transaction", "persistent", "content-length",
                                           "priority", "ackspec-message-id"]))


@settings(max_examples=300, deadline=None)
@given(destination=_text, body=st.binary(max_size=40), headers=st.dictionaries(_names, _text, max_size=5),
       persistent=st.booleans(), receipt=st.none() | _text, transaction=st.none() | _text)
def test_encode_send_is_the_codecs_frame(destination: str, body: bytes, headers: dict[str, str], persistent: bool,
                                         receipt: str | None, transaction: str | None) -> None:
    pairs = [("destination", destination), ("persistent", "true" if persistent else "false")]
    if receipt is not None:
        pairs.append(("receipt", receipt))
    if transaction is not None:
        pairs.append(("transaction", transaction))
    pairs += [(k, v) for k, v in headers.items()
              if k not in {"destination", "receipt", "transaction", "persistent", "content-length"}]
    frame = Frame("SEND", tuple(pairs), body)
    data = encode_send(destination, body, headers, persistent=persistent, receipt=receipt, transaction=transaction)
    assert data == encode(frame, content_length=bool(body))
    if all(name for name, _ in pairs):  # an empty header name is written but cannot be parsed back
        parsed = [f for f in FrameParser().feed(data) if isinstance(f, Frame)]
        expected = pairs + ([("content-length", str(len(body)))] if body else [])
        assert parsed == [Frame("SEND", tuple(expected), body)]


_receipt_ids = st.one_of(st.from_regex(r"[-.\w]{1,12}", fullmatch=True), _text)


@settings(max_examples=300, deadline=None)
@given(receipt_id=_receipt_ids, extra=st.sampled_from([b"", b"\n", b"RECEIPT\nreceipt-id:x\n\n\x00"]),
       crlf=st.booleans())
def test_plain_receipt_shortcut_agrees_with_the_parser(receipt_id: str, extra: bytes, crlf: bool) -> None:
    data = encode(Frame("RECEIPT", (("receipt-id", receipt_id),)))
    if crlf:
        data = data.replace(b"\n", b"\r\n", 1)
    data += extra
    plain = PLAIN_RECEIPT.fullmatch(data)
    parsed = FrameParser().feed(data)
    if plain is not None:  # the shortcut is taken only for one whole frame the parser reads the same way
        assert parsed == [Frame("RECEIPT", (("receipt-id", plain.group(1).decode("ascii")),))]
    else:
        plain_id = receipt_id.isascii() and all(c.isalnum() or c in "-._" for c in receipt_id)
        assert extra or crlf or not receipt_id or not plain_id


def test_parser_idle_only_between_frames() -> None:
    parser = FrameParser()
    assert parser.idle
    parser.feed(b"RECEIPT\nreceipt-id:a\n")
    assert not parser.idle
    parser.feed(b"\n\x00")
    assert parser.idle
    parser.feed(b"MESSAGE\ncontent-length:3\n\n")  # headers parsed, body pending
    assert not parser.idle
    parser.feed(b"abc\x00")
    assert parser.idle
