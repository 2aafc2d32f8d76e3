"""The HTML report in a real browser (headless Chromium): it loads without a console error, every plot is
laid out with a size, the table sorts, and a screenshot is taken. Skipped where Chromium is absent
(./run-tests installs Debian's ``chromium`` when it runs as root)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from taskbench.report.html import render
from taskbench.results import load
from tests.report.synthetic import queue_run

SAMPLES = Path(__file__).parent.parent / "results" / "samples"
CHROMIUM = next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (./run-tests installs it as root)")

# appended by the test only: what the browser laid out, written into the DOM that --dump-dom prints
PROBE = """<script>
document.querySelectorAll('svg.plot').forEach(function (svg, i) {
  var box = svg.getBoundingClientRect();
  var drawn = svg.querySelectorAll('path, use, rect, text').length;
  svg.setAttribute('data-probe', Math.round(box.width) + 'x' + Math.round(box.height) + ':' + drawn);
});
var th = document.querySelectorAll('table.sortable thead th')[2];
if (th) { th.click(); document.body.setAttribute('data-sorted', th.getAttribute('data-dir')); }
</script></body>"""


def browse(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", "--window-size=1280,2000", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", ["v1-run-fault", "v1-scenario-http",
                                  "synthetic-fault"])
def test_the_report_loads_in_chromium_with_every_plot_drawn(name: str, tmp_path: Path) -> None:
    result = queue_run(fault=True) if name == "synthetic-fault" else load(SAMPLES / f"{name}.json")
    page = tmp_path / "report.html"
    text = render(result)
    page.write_text(text.replace("</body>", PROBE, 1))
    out = browse(page, "--dump-dom")
    assert out.returncode == 0, out.stderr[-2000:]
    console = [line for line in out.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    dom = out.stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-ready="1"' in body.group(0) and "data-errors" not in body.group(0), body.group(0)
    assert 'data-sorted="asc"' in body.group(0)
    probes = re.findall(r'<svg[^>]*class="plot[^"]*"[^>]*data-probe="(\d+)x(\d+):(\d+)"', dom)
    assert len(probes) == text.count("<svg") > 0
    for width, height, drawn in probes:
        assert int(width) > 200 and int(height) > 50 and int(drawn) > 10, probes


def test_a_screenshot_of_the_report(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render(queue_run(fault=True)))
    shot = tmp_path / "report.png"
    out = browse(page, f"--screenshot={shot}")
    assert out.returncode == 0, out.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
