"""The verdicts in the forms CI systems show natively: a JUnit XML file (GitLab's merge-request widget,
Jenkins, GitHub's test-report actions) and GitHub-flavoured Markdown (`$GITHUB_STEP_SUMMARY`).

One testcase per arm the report judges (every row but the baselines), named `id [variant]` in a suite
per experiment. What fails is what a CI job must stop on, and nothing a shared machine's timing could
cause: an arm whose repeats errored, and an arm whose conclusive verdict reversed against the reference
(`--against`: faster <-> slower than published). A verdict that disagrees with the publication ("slower
than published") is a finding, not a failure; an inconclusive arm passes with its interval in the
testcase's output; an arm with no records is skipped, with the reason.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import Sequence

import pandas as pd

from pipelines.core.config.arm import Arm
from pipelines.core.report import tables
from pipelines.core.report.drift import GAINED, LOST, REVERSED, Drift, view as drift_view
from pipelines.core.report.render import markdown_table
from pipelines.core.stats import intervals
from pipelines.core.stats.rows import Row


def _interval(row: Row) -> str:
    if row.ratio is None:
        return "no ratio"
    low_high = "no interval" if row.ci_low is None else intervals.Interval(row.ci_low, row.ci_high).text()
    published = "" if row.published_ratio is None else f", published {intervals.figure(row.published_ratio)}"
    return f"{intervals.fmt(row.ratio)}x {low_high}{published}"


def _reversed(drift: Drift | None) -> dict[tuple[str, str, str], str]:
    if drift is None or drift.data.empty:
        return {}
    flipped = drift.data[drift.data.changed.astype(str).isin([REVERSED, LOST, GAINED])]
    return {(r.experiment, r.variant, r.scale): f"{r.changed.lower()}: {r.ref_verdict} in {drift.reference} -> "
            f"{r.verdict} here" for r in flipped.itertuples()}


def judged(rows: Sequence[Row]) -> list[Row]:
    """The arms a verdict speaks of: every row but the baselines (ratio 1 by definition)."""
    return [row for row in rows if row.verdict != "baseline"]


def junit(rows: Sequence[Row], drift: Drift | None, name: str = "accel") -> str:
    """The JUnit XML text: a <testsuites> of one <testsuite> per experiment."""
    reversed_ = _reversed(drift)
    suites = ET.Element("testsuites", name=name)
    by_experiment: dict[str, list[Row]] = defaultdict(list)
    for row in judged(rows):
        by_experiment[row.experiment].append(row)
    totals = defaultdict(int)
    for experiment, arms in by_experiment.items():
        suite = ET.SubElement(suites, "testsuite", name=experiment)
        counts = defaultdict(int)
        for row in arms:
            case = ET.SubElement(suite, "testcase", name=str(Arm.of(row)), classname=f"{name}.{experiment}")
            counts["tests"] += 1
            text = f"{row.verdict}: {_interval(row)}" + (f" ({row.why})" if row.why else "")
            if row.errors:
                counts["errors"] += 1
                ET.SubElement(case, "error", message=row.errors[0][:500], type="error").text = "\n".join(row.errors)
            elif (row.experiment, row.variant, row.scale) in reversed_:
                counts["failures"] += 1
                why = reversed_[(row.experiment, row.variant, row.scale)]
                ET.SubElement(case, "failure", message=f"conclusive verdict changed: {why}",
                              type="reversal" if why.startswith("reversed") else "reproduction").text = text
            elif row.n == 0:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=row.why or "not run here")
            ET.SubElement(case, "system-out").text = text
        for key in ("tests", "failures", "errors", "skipped"):
            suite.set(key, str(counts[key]))
            totals[key] += counts[key]
    for key in ("tests", "failures", "errors", "skipped"):
        suites.set(key, str(totals[key]))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def markdown(rows: Sequence[Row], drift: Drift | None, drift_skipped: str | None = None,
             title: str = "accel: published vs reproduced") -> str:
    """The verdict table and the drift.data (or why there is none), as GitHub-flavoured Markdown."""
    arms = judged(rows)
    counts = pd.Series([row.verdict for row in arms]).value_counts() if arms else pd.Series(dtype=int)
    lines = [f"## {title}", "",
             ", ".join(f"{count} {verdict}" for verdict, count in counts.items()) or "no judged arm", "",
             markdown_table(tables.verdict_view(tables.frame(list(rows)))) if rows else "(no records)", ""]
    errors = [f"- error: {Arm.of(row)}: {error}" for row in rows for error in row.errors]
    if errors:
        lines += ["### Errors", "", *errors, ""]
    if drift is not None:
        reversals = drift.reversals
        lines += [f"### Against {drift.reference}", "",
                  f"**{len(reversals)} conclusive verdict(s) changed**: " + "; ".join(reversals) if reversals
                  else "No conclusive verdict reversed, no reproduction lost or gained.", ""]
        if not drift.data.empty:
            lines += [markdown_table(drift_view(drift.data)), ""]
    elif drift_skipped:
        lines += ["### Drift check skipped", "", drift_skipped, ""]
    return "\n".join(lines)
