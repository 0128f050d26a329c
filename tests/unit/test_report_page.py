"""report.html opens with its answer: the verdict counts and the machine, then the forest plot of every
judged arm against its band, on the first screen of a 1280x900 window, as headless Chromium lays it out."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REFERENCE = REPO / "results" / "reference" / "cpu-2core-amd-f25m17-bench"
# measured in the page itself once it has loaded, and written into the DOM that --dump-dom prints
PROBE = """<script>window.addEventListener('load', () => {
  const summary = [...document.querySelectorAll('h2')].find(h => h.textContent === 'Summary');
  const plot = document.querySelector('figure img');
  document.body.setAttribute('data-probe', JSON.stringify({
    summary: summary ? summary.getBoundingClientRect().bottom : null,
    plot: plot ? plot.getBoundingClientRect().top : null, plot_alt: plot ? plot.alt : null,
    height: window.innerHeight}));
});</script>"""


def test_the_summary_and_the_forest_plot_lead_the_page(tmp_path, accel_in_process):
    out = tmp_path / "report"
    run = accel_in_process("report", "--results-dir", str(REFERENCE), "--out", str(out), "--format", "html")
    assert run.returncode == 0, run.stderr
    page = (out / "report.html").read_text()
    headings = re.findall(r"<h2>([^<]+)</h2>", page)
    assert headings[:2] == ["Summary", "How to read it"], headings
    summary = page[page.index("<h2>Summary</h2>"):page.index("<h2>How to read it</h2>")]
    assert re.search(r"<b>Verdicts:</b> \d+ faster than published, \d+ slower than published, \d+ inconclusive",
                     summary), summary[:500]
    assert "<b>Machine:</b> AMD EPYC (2 logical CPUs), no GPU, torch 2.14.1" in summary
    assert summary.count("<img") == 1 and (out / "forest.png").stat().st_size > 10_000
    assert "? vs ?" not in page  # an arm that recorded no count of samples is left out, not shown as "?"


@pytest.mark.skipif(CHROMIUM is None, reason="needs headless Chromium (make test installs Debian's chromium)")
def test_chromium_shows_the_summary_and_the_plot_on_the_first_screen(tmp_path, accel_in_process):
    import json

    out = tmp_path / "report"
    assert accel_in_process("report", "--results-dir", str(REFERENCE), "--out", str(out), "--format",
                            "html").returncode == 0
    probed = tmp_path / "probed.html"
    probed.write_text((out / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                          "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r"data-probe=\"([^\"]+)\"", dom.stdout)
    assert found, dom.stdout[:500]
    probe = json.loads(found.group(1).replace("&quot;", '"'))
    assert probe["plot_alt"].startswith("Every judged arm")
    # the summary's heading in the first third of the screen, and the plot starting in its first half
    assert probe["summary"] < probe["height"] / 3 and probe["plot"] < probe["height"] / 2, probe
    shot = tmp_path / "first-screen.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1280,900", (out / "report.html").as_uri()], capture_output=True, timeout=120,
                   check=True)
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
