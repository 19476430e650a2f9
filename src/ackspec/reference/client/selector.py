"""A small message selector: ``name = 'value'`` terms joined by ``AND``.

Enough to make ActiveMQ's UNMATCHED acknowledgement (type 5) observable: a topic message
that does not match the consumer's selector is acknowledged as UNMATCHED instead of being
delivered. Full SQL-92 selectors are out of scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ackspec.reference.client.errors import JMSError

if TYPE_CHECKING:
    from ackspec.reference.client.message import Message

_TERM = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*=\s*'([^']*)'\s*$")


@dataclass(frozen=True, slots=True)
class Selector:
    text: str
    terms: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str | None) -> Selector | None:
        if text is None or not text.strip():
            return None
        terms = []
        for part in re.split(r"\s+AND\s+", text, flags=re.IGNORECASE):
            match = _TERM.match(part)
            if match is None:
                raise JMSError(f"unsupported selector term {part!r} (only name = 'value' AND ...)")
            terms.append((match.group(1), match.group(2)))
        return cls(text, tuple(terms))

    def matches(self, message: Message) -> bool:
        return all(message.get_property(name) == value for name, value in self.terms)
