"""A reader that stops early (``ackspec spec list | head -1``) ends the command quietly."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

F_SETPIPE_SZ = 1031  # Linux: set a pipe's capacity


def test_closed_pipe_is_no_traceback() -> None:
    read_end, write_end = os.pipe()
    # a one-page pipe: the listing (tens of KiB) cannot all fit, so the command is still
    # writing when the reader goes away, whatever the scheduling
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from ackspec.cli import main; sys.exit(main())",
                             "spec", "list"], stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        first = reader.readline()  # the reader goes away after one line, as head -1 does
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    status = proc.wait(timeout=60)
    assert first.strip(), "the command printed nothing before the pipe closed"
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert status == 141, status
