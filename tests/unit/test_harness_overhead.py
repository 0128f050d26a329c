"""The harness overhead (the shared loop against a plain hand-written loop) is read by its interval:
`tables.overhead` gives goal met, over the goal, inconclusive (too few repeats, or an interval that reaches
past the 2 % goal) or not assessed (no interval), and calls a negative overhead noise, never "within the
goal"; the report's Harness overhead section and ci/harness-overhead.py's printed summary say the same."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import REPO
from pipelines.core.report import summary as report
from pipelines.core.report import tables
from pipelines.core.stats import intervals
from recordutil import record, table_rows, write


def test_overhead_follows_the_interval_and_a_negative_one_is_noise():
    faster = tables.overhead(1.115, intervals.Interval(0.95, 1.30), repeats=6)
    assert faster.pct == pytest.approx(-11.5)
    assert faster.text.startswith("-11.5 % (harness faster than the plain loop: within noise, no overhead")
    assert faster.verdict == intervals.INCONCLUSIVE  # the interval reaches +5 %, beyond the 2 % goal
    met = tables.overhead(1.001, intervals.Interval(0.99, 1.01), repeats=3)
    assert met.verdict == tables.GOAL_MET and met.pct_interval == pytest.approx((-1.0, 1.0))
    over = tables.overhead(0.90, intervals.Interval(0.89, 0.91), repeats=3)
    assert over.verdict == tables.OVER_GOAL
    few = tables.overhead(1.0, intervals.Interval(0.999, 1.001), repeats=2)
    assert few.verdict == intervals.INCONCLUSIVE and "2 repeat(s)" in few.text
    bare = tables.overhead(1.0, None, repeats=5)
    assert bare.verdict == tables.NOT_ASSESSED and "goal met" not in bare.text
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
    line = script.summary([1115.0, 960.0, 1270.0], [1000.0, 1000.0, 1000.0], 60)
    assert "overhead -11.5 % (harness faster than the plain loop: within noise, no overhead measured)" in line
    assert "inconclusive" in line and "goal within" not in line
