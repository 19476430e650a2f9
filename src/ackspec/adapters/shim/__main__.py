"""``python -m ackspec.adapters.shim``: the reference client behind the JSON-lines shim protocol."""

from __future__ import annotations

import sys

from ackspec.adapters.refclient import RefClientCUT
from ackspec.adapters.shim.server import main

if __name__ == "__main__":
    sys.exit(main(RefClientCUT()))
