"""The verdicts as CI systems read them (report/ci.py, `accel report --junit / --markdown`), on the
committed reference of the Zen 4 class: JUnit XML parsed by junitparser, one testcase per judged arm; an
error or a reversal against the reference fails; an arm not run is skipped; Markdown for a step summary."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from pipelines.core.report import ci, drift as report_drift
from pipelines.core.stats import intervals

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "results/reference/cpu-2core-amd-f25m17-bench"


@pytest.fixture(scope="module")
def judged():
    return report_drift.judge(REFERENCE)


def parse(tmp_path: Path, text: str) -> JUnitXml:
    path = tmp_path / "verdicts.xml"
    path.write_text(text)
    return JUnitXml.fromfile(str(path))


def cases(xml: JUnitXml) -> dict[str, object]:
    return {case.name: case for suite in xml for case in suite}


def test_one_testcase_per_judged_arm_and_the_interval_in_its_output(tmp_path, judged):
    xml = parse(tmp_path, ci.junit(judged.rows, None))
    arms = ci.judged(judged.rows)
    assert len(cases(xml)) == len(arms) == xml.tests and xml.failures == 0 and xml.errors == 0
    inconclusive = next(row for row in arms if row.verdict == intervals.INCONCLUSIVE and row.ci_low is not None)
    case = cases(xml)[f"{inconclusive.experiment} [{inconclusive.variant}]"]
    assert not case.result and intervals.Interval(inconclusive.ci_low, inconclusive.ci_high).text() in case.system_out
    not_run = [row for row in arms if row.n == 0]
    assert not_run and xml.skipped == len(not_run)
    assert all(isinstance(cases(xml)[f"{r.experiment} [{r.variant}]"].result[0], Skipped) for r in not_run)


def test_a_reversal_against_the_reference_fails_its_arm_and_an_error_errors(tmp_path, judged):
    row = next(r for r in judged.rows if r.verdict == intervals.FASTER)
    flipped = pd.DataFrame([dict(experiment=row.experiment, variant=row.variant, scale=row.scale, ratio=row.ratio,
                                 ci_low=row.ci_low, ci_high=row.ci_high, ref_ratio=0.5, ref_ci_low=0.4,
                                 ref_ci_high=0.6, difference=row.ratio - 0.5, verdict=row.verdict,
                                 ref_verdict=intervals.SLOWER, reversed=True, changed=report_drift.REVERSED)],
                           columns=list(report_drift.COLUMNS))
    drift = report_drift.Drift(Path("results/reference/other"), judged.loaded, flipped, ["reversed"])
    broken = dataclasses.replace(judged.rows[1], errors=["RuntimeError: injected"])
    rows = [broken if r is judged.rows[1] else r for r in judged.rows]
    xml = parse(tmp_path, ci.junit(rows, drift))
    assert xml.failures == 1 and xml.errors == 1
    failed = cases(xml)[f"{row.experiment} [{row.variant}]"].result[0]
    assert isinstance(failed, Failure) and "slower than published in results/reference/other" in failed.message
    assert isinstance(cases(xml)[f"{broken.experiment} [{broken.variant}]"].result[0], Error)


def test_accel_report_writes_both_files_and_appends_to_a_step_summary(tmp_path):
    from click.testing import CliRunner

    from pipelines.core.cli.main import cli

    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    done = CliRunner().invoke(cli, ["report", "--results-dir", str(REFERENCE), "--junit", str(tmp_path / "v.xml"),
                                    "--markdown", str(summary), "--against", str(REFERENCE)])
    assert done.exit_code == 0, done.output
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "| ch2-nobias" in text
    assert "No conclusive verdict reversed, no reproduction lost" in text
    assert JUnitXml.fromfile(str(tmp_path / "v.xml")).tests > 0
    assert not list(tmp_path.glob("report.*"))  # no --out: only the two files asked for


def test_a_lost_reproduction_fails_its_arm_as_its_own_kind(tmp_path, judged):
    """reproduced in the reference -> slower here: not a reversal, but a conclusion lost, and the gate fails it."""
    row = next(r for r in judged.rows if r.verdict == intervals.SLOWER)
    lost = pd.DataFrame([dict(experiment=row.experiment, variant=row.variant, scale=row.scale, ratio=row.ratio,
                              ci_low=row.ci_low, ci_high=row.ci_high, ref_ratio=1.2, ref_ci_low=1.1, ref_ci_high=1.3,
                              difference=row.ratio - 1.2, verdict=row.verdict, ref_verdict=intervals.REPRODUCED,
                              reversed=False, changed=report_drift.LOST)], columns=list(report_drift.COLUMNS))
    drift = report_drift.Drift(Path("results/reference/other"), judged.loaded, lost, ["lost"])
    xml = parse(tmp_path, ci.junit(judged.rows, drift))
    assert xml.failures == 1
    failed = cases(xml)[f"{row.experiment} [{row.variant}]"].result[0]
    assert isinstance(failed, Failure) and failed.type == "reproduction"
    assert failed.message.startswith("conclusive verdict changed: reproduction lost: reproduced in")
