"""Writing small catalogue files for the loader and CLI tests."""

from __future__ import annotations

import textwrap

MINIMAL_REQUIREMENT = """\
  - id: {id}
    title: A minimal requirement
    rule: A rule written only for the loader tests.
    level: MUST
    source: {{document: STOMP 1.2, section: ERROR}}
    role: broker
    protocols: [stomp]
    testable: true
    capabilities: []
    technique: example
"""


def family_yaml(family: str, *ids: str, prefixes: str = "[STOMP]") -> str:
    head = textwrap.dedent(f"""\
        family:
          id: {family}
          title: Test family {family}
          description: A family written by the loader tests.
          prefixes: {prefixes}
        requirements:
        """)
    return head + "".join(MINIMAL_REQUIREMENT.format(id=rid) for rid in ids)
