"""The report page in headless Chromium: it renders, runs its script without console errors, drills down.

Needs Debian's ``chromium`` package (CI: ``apt-get update && apt-get install -y chromium``); skipped
without it. A screenshot is kept in ``ackspec-out/artifacts/`` as a CI artifact.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.pipeline.test_report import REQ_FLIP, make_run

from ackspec.pipeline.report import build_report
from ackspec.results import Verdict
from ackspec.spec import load_catalogue

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
               "--disable-default-apps", "--mute-audio", f"--user-data-dir={profile}", "--enable-logging=stderr",
               "--v=0", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line and re.search(r"error|uncaught|exception", line, re.IGNORECASE)]


def test_report_renders_in_chromium_without_console_errors(tmp_path: Path, artifacts: Path) -> None:
    runs = [make_run(tmp_path, "run1", "2026-11-20T10:00:00+00:00", Verdict.PASS),
            make_run(tmp_path, "run2", "2026-11-21T10:00:00+00:00", Verdict.FAIL)]
    summary = build_report(runs, tmp_path / "out", engine="python")
    url = summary.html.resolve().as_uri()

    dom = chromium(tmp_path, "--dump-dom", f"{url}#req={REQ_FLIP}")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_errors(dom.stderr) == []
    assert 'data-ready="true"' in dom.stdout  # the script ran to its end
    assert 'id="panel" class="open"' in dom.stdout  # drill-down opened from the URL
    panel = dom.stdout.split('id="panel"', 1)[1]
    rule = load_catalogue().get(REQ_FLIP).rule
    assert rule.split(",")[0][:40] in panel  # the rule's text ...
    assert "Source: Jakarta Messaging" in panel  # ... and its source
    assert "order broken" in dom.stdout  # the failing test's message in the drill-down

    shot = artifacts / "report.png"
    shot.unlink(missing_ok=True)
    result = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", "--hide-scrollbars", url)
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_errors(result.stderr) == []
    assert shot.is_file() and shot.stat().st_size > 10_000
    (artifacts / "report.html").write_text(summary.html.read_text())
