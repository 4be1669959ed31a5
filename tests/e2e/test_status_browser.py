"""The status page in a real headless browser (Debian's ``chromium``): the DOM and a screenshot show the stuck trace.

Needs ``chromium`` on the PATH (``apt-get install -y chromium``): skipped without it locally, a failure under
``LOOPGUARD_REQUIRE_E2E=1``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.serve._loop_request import loop_request
from tests.serve._support import Harness, post
from tests.support.external import require_module, unavailable

pytestmark = pytest.mark.e2e

_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
# The stuck row's background on the page (#fdd), as matplotlib reads a PNG's pixels (0..1).
_STUCK_RGB = (1.0, 0xDD / 255, 0xDD / 255)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    unavailable("no chromium on the PATH (apt-get install -y chromium)")


def _browse(browser: str, url: str, *options: str) -> subprocess.CompletedProcess[str]:
    # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start.
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--window-size=1280,900", *options, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def test_the_browser_shows_the_stuck_trace(tmp_path: Path) -> None:
    """Chromium renders the page: its DOM has the stuck trace's row with a link to the trace UI, and its
    screenshot holds the stuck row's colour."""
    browser = _chromium()
    image = require_module("matplotlib.image", "matplotlib")
    with Harness(status="127.0.0.1:0", trace_url="http://localhost:16686/trace/{trace_id}") as h:
        assert post(h.server.http_port or 0, loop_request(_TRACE), "application/json")[0] == 200
        url = f"http://127.0.0.1:{h.server.status_port}/"
        dom = _browse(browser, url, "--dump-dom")
        shot = tmp_path / "status.png"
        done = _browse(browser, url, f"--screenshot={shot}")
    assert dom.returncode == 0, dom.stderr[-2000:]
    rows = re.findall(r'<tr class="(\w+)">(.*?)</tr>', dom.stdout.split('id="traces"', 1)[1].split("</table>")[0])
    assert len(rows) == 1, dom.stdout[:3000]
    kind, cells = rows[0]
    assert kind == "stuck"
    assert f'<a href="http://localhost:16686/trace/{_TRACE}">{_TRACE}</a>' in cells
    assert "<td>weather-svc</td><td>weather_agent</td><td>stuck</td><td>tool</td><td>6</td>" in cells
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = image.imread(str(shot))
    assert pixels.shape[:2] == (900, 1280)
    pink = (abs(pixels[:, :, 0] - _STUCK_RGB[0]) < 0.02) & (abs(pixels[:, :, 1] - _STUCK_RGB[1]) < 0.02) & (
        abs(pixels[:, :, 2] - _STUCK_RGB[2]) < 0.02)
    # The stuck rows (the held trace, its transition and its stop) are drawn: thousands of pixels of that colour.
    assert int(pink.sum()) > 2000
