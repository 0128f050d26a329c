"""The history: every repeat in a SQLite store beside the records, `accel history ID` with
change points found by ruptures, and the offline trend page, checked in a real headless browser."""

import re
import shutil
import sqlite3
import subprocess

import pytest

import recordutil
from pipelines.core.record import history
from pipelines.core.stats import changes

SHIFT_AT = 5  # runs 0-4 at about 1000 samples/s, runs 5-9 at about 800: a planted 20 % regression


def plant(folder, runs: int = 10, shift_at: int | None = SHIFT_AT, noisy_run: int | None = None):
    """`runs` runs of ch2-baseline, two repeats each, one file per run as `accel run` writes them."""
    for i in range(runs):
        level = 800.0 if shift_at is not None and i >= shift_at else 1000.0
        jitter = 1 + 0.01 * ((i * 7) % 5 - 2)  # deterministic +-2 %
        run_id = f"202611{10 + i:02d}T120000Z-run{i:03d}"
        recs = []
        for repeat in range(2):
            rec = recordutil.record("ch2-baseline", "baseline", throughput=level * jitter * (1 + 0.002 * repeat),
                                    repeat=repeat, torch="2.14.1" if i < (shift_at or runs) else "2.15.0")
            rec["run_id"] = run_id
            rec["machine"] = {"noisy": i == noisy_run, "noisy_reasons": ["others busy"] if i == noisy_run else []}
            recs.append(rec)
        recordutil.write(folder, f"ch2-baseline--{run_id}", recs)


def test_change_points_find_a_planted_shift_and_nothing_in_noise():
    values = [1000 * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(10)]
    assert changes.change_points(values) == []
    shifted = [v * (0.8 if i >= SHIFT_AT else 1) for i, v in enumerate(values)]
    (found,) = changes.change_points(shifted)
    assert found.index == SHIFT_AT and -22 < found.percent < -18


def test_the_store_indexes_the_records_and_is_rebuilt_from_them(tmp_path):
    plant(tmp_path)
    assert history.sync(tmp_path) == []
    stored = history.repeats(tmp_path, "ch2-baseline")
    assert len(stored) == 20 and history.store_path(tmp_path).is_file()
    with sqlite3.connect(history.store_path(tmp_path)) as db:  # a second sync reads nothing new
        before = db.execute("SELECT count(*) FROM files").fetchone()[0]
    history.sync(tmp_path)
    history.store_path(tmp_path).unlink()
    history.sync(tmp_path)
    assert history.repeats(tmp_path, "ch2-baseline") == stored and before == 10
    next(tmp_path.glob("*run009.jsonl")).unlink()  # a record file removed: its repeats leave the store
    history.sync(tmp_path)
    assert len(history.repeats(tmp_path, "ch2-baseline")) == 18


def test_accel_history_marks_the_change_point_and_what_changed(tmp_path, accel_in_process):
    plant(tmp_path, noisy_run=2)
    run = accel_in_process("history", "ch2-baseline", "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if "run0" in line]
    assert len(lines) == 10
    marked = [i for i, line in enumerate(lines) if "<- change" in line]
    assert marked == [SHIFT_AT], run.stdout
    assert re.search(r"change -\d\d\.\d %", lines[SHIFT_AT]) and "torch 2.14.1 -> 2.15.0" in lines[SHIFT_AT]
    assert "noisy" in lines[2] and "noisy" not in lines[3]


def test_accel_history_on_a_steady_history_marks_nothing(tmp_path, accel_in_process):
    plant(tmp_path, shift_at=None)
    run = accel_in_process("history", "ch2-baseline", "--results-dir", str(tmp_path), "--rebuild")
    assert run.returncode == 0 and "<- change" not in run.stdout and "no change point" in run.stdout


def test_accel_history_without_records_is_one_line(tmp_path, accel_in_process):
    run = accel_in_process("history", "ch2-baseline", "--results-dir", str(tmp_path))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "accel run ch2-baseline" in run.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs headless Chromium (make test installs Debian's chromium)")
def test_the_trend_page_renders_every_run_and_the_change_point_in_chromium(tmp_path, accel_in_process):
    results, out = tmp_path / "results", tmp_path / "report"
    plant(results)
    run = accel_in_process("report", "--results-dir", str(results), "--out", str(out), "--format", "html")
    assert run.returncode == 0, run.stderr
    page = out / "trend.html"
    assert "http" not in page.read_text().replace("http://www.w3.org/2000/svg", "")  # nothing fetched at view time
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    drawn = re.findall(r'<circle class="run[^"]*" data-run="([^"]+)"', dom.stdout)
    assert sorted(drawn) == sorted(f"202611{10 + i:02d}T120000Z-run{i:03d}" for i in range(10))
    assert re.findall(r'<line class="change-point" data-index="(\d+)"', dom.stdout) == [str(SHIFT_AT)]
    shot = tmp_path / "trend.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=900,700", page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 5000  # a drawn page, not a blank one


def test_runs_of_one_day_are_labelled_with_their_times_and_runs_of_several_with_their_dates():
    """A reference's rounds ran minutes apart: three points over one date label read as one run."""
    from pipelines.core.report import trend
    from pipelines.core.stats.changes import RunPoint

    same_day = [RunPoint(f"20261127T11{m:02d}11Z-abc", 100.0 + m, 1) for m in (9, 10, 12)]
    page = trend.chart(same_day, [])
    assert ">11-27 11:09<" in page and ">11-27 11:12<" in page and "runs, oldest first (UTC)" in page
    days = [RunPoint(f"202611{d:02d}T110911Z-abc", 100.0, 1) for d in (25, 26, 27)]
    page = trend.chart(days, [])
    assert ">2026-11-25<" in page and ">2026-11-27<" in page and "(UTC)" not in page
