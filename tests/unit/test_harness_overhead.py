"""The harness overhead (the shared loop against a plain hand-written loop) is read by its interval:
`bases/harness.py overhead` gives goal met, over the goal, inconclusive (too few repeats, or an interval that reaches
past the 2 % goal) or not assessed (no interval), and calls a negative overhead noise, never "within the
goal"; the report's Harness overhead section and ci/harness-overhead.py's printed summary say the same.
ci/harness-overhead.py runs end to end and writes both arms' records, and `tables.harness` gives each
workload (model, batch, device, scale) its own row, ratio and interval."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import REPO
from pipelines.core.record.results import load
from pipelines.core.report import views as report
from pipelines.core.stats.bases import harness
from pipelines.core.stats import intervals
from recordutil import record, table_rows, write


def test_overhead_follows_the_interval_and_a_negative_one_is_noise():
    faster = harness.overhead(1.115, intervals.Interval(0.95, 1.30), repeats=6)
    assert faster.pct == pytest.approx(-11.5)
    assert faster.text.startswith("-11.5 % (harness faster than the plain loop: within noise, no overhead")
    assert faster.verdict == intervals.INCONCLUSIVE  # the interval reaches +5 %, beyond the 2 % goal
    met = harness.overhead(1.001, intervals.Interval(0.99, 1.01), repeats=3)
    assert met.verdict == harness.GOAL_MET and met.pct_interval == pytest.approx((-1.0, 1.0))
    over = harness.overhead(0.90, intervals.Interval(0.89, 0.91), repeats=3)
    assert over.verdict == harness.OVER_GOAL
    few = harness.overhead(1.0, intervals.Interval(0.999, 1.001), repeats=2)
    assert few.verdict == intervals.INCONCLUSIVE and "2 repeat(s)" in few.text
    bare = harness.overhead(1.0, None, repeats=5)
    assert bare.verdict == harness.NOT_ASSESSED and "goal met" not in bare.text
    for reading in (faster, met, over, few, bare):
        assert "within goal" not in reading.text and "within the goal" not in reading.text


def _harness_records(shared: tuple[float, ...], hand: tuple[float, ...]) -> list[dict]:
    out = []
    for arm, values in (("shared-loop", shared), ("hand-loop", hand)):
        for repeat, value in enumerate(values):
            rec = record("harness-overhead", arm, value, repeat=repeat)
            rec["config"].update(model="cnn_cifar10", batch_size=64, device="cpu", dataset="synthetic")
            out.append(rec)
    return out


def test_report_never_calls_a_negative_overhead_within_the_goal(tmp_path):
    write(tmp_path / "r", "harness", _harness_records((1115.0, 960.0, 1270.0), (1000.0, 1000.0, 1000.0)))
    md = report.write_report(tmp_path / "r", tmp_path / "out", formats=("md",)).paths[0].read_text()
    section = md.split("## Harness overhead\n", 1)[1].split("\n## ", 1)[0]
    assert "harness faster than the plain loop: within noise, no overhead measured" in section
    (cells,) = table_rows(md, "Harness overhead")
    assert cells[6] == "-11.5" and cells[8] == "inconclusive"
    assert "Every workload within the goal" not in section and "Inconclusive" in section


def test_harness_overhead_script_prints_the_interval_reading():
    spec = importlib.util.spec_from_file_location("harness_overhead", REPO / "ci" / "harness-overhead.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    line = script.result_line([1115.0, 960.0, 1270.0], [1000.0, 1000.0, 1000.0], 60)
    assert "overhead -11.5 % (harness faster than the plain loop: within noise, no overhead measured)" in line
    assert "inconclusive" in line and "goal within" not in line


@pytest.mark.slow
def test_harness_overhead_reports_a_ratio(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "ci" / "harness-overhead.py"), "--steps", "3", "--warmup",
                             "1", "--repeats", "2", "--results-dir", str(tmp_path)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ratio" in result.stdout
    recs = load(tmp_path).records
    assert sorted(r["variant"] for r in recs) == ["hand-loop", "hand-loop", "shared-loop", "shared-loop"]
    assert all(r["metrics"]["throughput_samples_per_s"] > 0 for r in recs)


def test_harness_overhead_has_one_row_per_workload_with_an_interval():
    """A small CNN and a ViT-B/16 never share a mean: each workload gets its own ratio and interval."""
    from pipelines.core.report import tables

    def record(model, batch, arm, value):
        return {"experiment": "harness-overhead", "status": "ok", "variant": arm,
                "config": {"model": model, "batch_size": batch, "device": "cuda"},
                "metrics": {"throughput_samples_per_s": value}}

    records = [record("cnn_cifar10", 64, arm, value) for arm, values in
               (("shared-loop", (20000, 21000, 22000)), ("hand-loop", (21000, 21000, 21000))) for value in values]
    records += [record("vit_b_16", 16, arm, value) for arm, values in
                (("shared-loop", (212, 220, 205)), ("hand-loop", (250, 255, 252))) for value in values]
    book = [{**r, "config": {**r["config"], "scale": "book", "epochs": 2, "dataset": "fashion_mnist"},
             "metrics": {**r["metrics"], "train_s": 100.0 + i}} for i, r in enumerate(records[:6])]
    table = tables.harness(records + book)  # book-scale runs of the same model get their own row
    assert list(table["workload"]) == ["cnn_cifar10 / batch 64 / cuda / bench",
                                       "cnn_cifar10 / batch 64 / cuda / book: 2 epochs of fashion_mnist",
                                       "vit_b_16 / batch 16 / cuda / bench"]
    assert table["spread (shared / hand)"][1] == "1.0 % / 1.0 %"  # sd 1 s of 101 s, 104 s
    table = table.drop(index=1).reset_index(drop=True)
    assert list(table["overhead %"]) == [0.0, 15.9]  # 1 - 212.3 / 252.3
    low, high = (float(x) for x in table["95 % interval (repeats)"][1].strip("[]").split(", "))
    assert low <= 0.84 <= high < 1

