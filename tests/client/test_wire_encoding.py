"""The reference client formats its SEND frames directly (:func:`encode_send`, on every send's path): the
bytes must be exactly what the sans-IO codec makes of the same frame, and parse back to it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.client.wire import encode_send
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
