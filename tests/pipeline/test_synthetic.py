"""The synthetic generator is reproducible: a seed names one history, in any process."""

from __future__ import annotations

import os
import subprocess
import sys

DIGEST = """
import hashlib
from ackspec.pipeline.synthetic import generate_suite
digest = hashlib.sha256()
for history in generate_suite(20, seed=20261127, anomaly_rate=0.5, run="r", target="t"):
    digest.update("".join(r.to_json() for r in history.records).encode())
    digest.update(repr(history.expected).encode())
print(digest.hexdigest())
"""


def test_the_same_seed_gives_the_same_histories_in_another_process() -> None:
    # string hashing is salted per process (PYTHONHASHSEED): nothing in a history may depend on it
    digests = {subprocess.run([sys.executable, "-c", DIGEST], env={**os.environ, "PYTHONHASHSEED": salt},
                              capture_output=True, text=True, check=True, timeout=120).stdout
               for salt in ("1", "2")}
    assert len(digests) == 1
