"""ci/calibrate-intervals.py's summary, on the committed calibration JSON and on a generated one for the
compiled pair: the A/A statistics per pair, and files of different entries never pooled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "calibrate-intervals.py"
DEFAULTS = REPO / "results" / "calibration" / "cpu-2core-amd-f25m17-defaults-18.json"


def summarize(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--summarize", *map(str, paths)], capture_output=True,
                          text=True, timeout=60)


def compiled_file(tmp_path: Path, ratios: list[tuple[float, float, float]]) -> Path:
    runs = [{"seconds": 280.0, "rounds": 4, "stopped_by": "precision",
             "compiled-again": {"ratio": r, "low": lo, "high": hi}} for r, lo, hi in ratios]
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps({"runs": {"auto": runs}, "ladder": {}, "blocks": 12,
                                "entry": "harness-calibration-compile", "command": "generated"}))
    return path


def test_the_committed_calibration_reports_both_pairs_and_the_injected_effects():
    out = summarize(DEFAULTS)
    assert out.returncode == 0, out.stderr
    assert "harness-calibration:" in out.stdout
    for pair in ("a-again", "big-again"):
        assert f"- A/A `{pair}`: the interval holds 1.00 in 18 of 18 runs" in out.stdout
    assert "slow-5pct: injected" in out.stdout and "detected (interval below 1) in 12 of 18" in out.stdout


def test_the_compiled_pair_is_summarized_on_its_own(tmp_path):
    out = summarize(compiled_file(tmp_path, [(1.01, 0.98, 1.04), (0.97, 0.95, 0.99), (1.0, 0.97, 1.03)]))
    assert out.returncode == 0, out.stderr
    assert "harness-calibration-compile:" in out.stdout
    assert "- A/A `compiled-again`: the interval holds 1.00 in 2 of 3 runs" in out.stdout
    assert "a-again" not in out.stdout and "slow-" not in out.stdout


def test_files_of_different_entries_are_not_pooled(tmp_path):
    out = summarize(DEFAULTS, compiled_file(tmp_path, [(1.0, 0.97, 1.03)]))
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "calibrate-intervals: these files calibrate different entries (harness-calibration, "
        "harness-calibration-compile): summarize each entry's files apart"]
