"""ci/calibrate-intervals.py's summary, on the committed calibration JSON and on a generated one for the
compiled pair: the A/A statistics per pair, and files of different entries never pooled."""

from __future__ import annotations

import json
import tarfile
import subprocess
import sys
from pathlib import Path

import pytest

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


RECORDS = sorted((REPO / "results" / "calibration").glob("*-records.tar.xz"))


def test_the_committed_records_give_the_committed_rows_under_the_current_method(tmp_path):
    """The calibration's raw records are committed beside its rows: judged again by the library as it is now
    (--recompute), they give the committed `-t.json` exactly (the t interval over processes)."""
    assert RECORDS, "no committed calibration records (results/calibration/*-records.tar.xz)"
    for archive in RECORDS:
        stem = archive.name.removesuffix("-records.tar.xz")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp_path / stem, filter="data")
        out = subprocess.run([sys.executable, str(SCRIPT), "--recompute", str(tmp_path / stem)], capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        mine = json.loads((tmp_path / stem / "calibration-recomputed.json").read_text())
        committed = json.loads((archive.parent / f"{stem}-t.json").read_text())
        for share, runs in committed["runs"].items():  # equal up to the last bits of a float sum
            assert len(mine["runs"][share]) == len(runs)
            for again, then in zip(mine["runs"][share], runs):
                for key, value in then.items():
                    assert again[key] == (pytest.approx(value, rel=1e-9) if isinstance(value, dict) else value)
        assert "- A/A `" in out.stdout and "`: the interval holds 1.00 in" in out.stdout  # a-again, compiled-again


def test_recompute_of_a_folder_without_a_calibration_says_so_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--recompute", str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"calibrate-intervals: no calibration.json in {tmp_path}"


def test_order_effects_pools_a_calibration_s_runs_and_measures_the_first_cycle(tmp_path):
    """The burn-in question of docs/timing.md, on the committed records: each arm's first cycle against the
    rest, pooled over every process of every run."""
    archive = REPO / "results" / "calibration" / "cpu-2core-intel-f6m207-defaults-22-records.tar.xz"  # 4 rounds each
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    folders = sorted(str(p) for p in tmp_path.glob("auto-*"))
    out = subprocess.run([sys.executable, str(REPO / "ci" / "order-effects.py"), "--pooled", *folders],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{len(folders)} folders pooled:")
    first = out.stdout.split("  first cycle", 1)[1]
    assert "harness-calibration [a-again]" in first and f"({4 * len(folders)} processes)" in first
