"""Published vs reproduced: the names the CLI, CI scripts and tests use, and the catalog's text views.

The report itself is three layers: rows (`stats.rows`: records -> one Row per arm with its ratio, interval
and verdict; the numbers in `stats.intervals`, baselines and pairing in `stats.pairing`, drift against a
reference in `report.drift`), render (`report.tables`: DataFrames; `report.render`: Markdown, HTML and CSV
from those DataFrames; `report.document`: the sections and the files) and plots (`report.plots`).
The functions here that print catalog text (`accel list`, `accel run`) need none of that, so pandas
and matplotlib are imported only when a report is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pipelines.core.config import experiments
from pipelines.core.stats import stopping
from pipelines.core.stats.intervals import figure, fmt
from pipelines.core.config.arm import Arm

FORMATS = ("md", "csv", "html")


def published_ratio_text(entry: experiments.Experiment) -> str:
    ratios = [figure(f.value) + (f"@{f.variant}" if f.variant else "") for f in entry.published
              if f.metric == "ratio"]
    return ", ".join(ratios) if ratios else "-"


def map_markdown() -> str:
    """The experiment map (docs/experiments.md): id -> what it compares -> what it reproduces -> pipeline -> target
    -> launcher -> make -> published."""
    lines = ["| id | compares | reproduces | pipeline | container | launcher | make target | published ratio "
             "| status |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in experiments.all_experiments().values():
        pipeline = f"`pipelines/{e.pipeline}.py`" if e.pipeline else "-"
        lines.append(f"| `{e.id}` | {e.compares} | {e.reproduces or '-'} | {pipeline} | `{e.target}` | "
                     f"`{e.launcher}` | `make {e.id}` | {published_ratio_text(e)} | {e.status} |")
    return "\n".join(lines)


def describe(entry: experiments.Experiment) -> str:
    lines = [f"{entry.id}: {entry.compares}",
             f"  reproduces: {entry.reproduces or '-'}",
             f"  status {entry.status}; pipeline {entry.pipeline or '-'}; target {entry.target}; "
             f"launcher {entry.launcher}; baseline {entry.baseline or '-'}"
             + (" (each arm against the baseline arm on the same total cores)" if entry.match_cores else "")]
    if entry.planned_reason:
        lines.append(f"  planned: {entry.planned_reason}")
    if entry.settings:
        lines.append("  book settings: " + ", ".join(f"{k}={v}" for k, v in entry.settings.items()))
    if entry.options or entry.knobs:
        lines.append("  options: " + ", ".join(f"{k}={v}" for k, v in {**entry.options, **entry.knobs}.items()))
    if entry.has_variants:
        lines.append("  variants: " + ", ".join(v.name for v in entry.variants))
    for fig in entry.published:
        where = f" [{fig.variant}]" if fig.variant else ""
        value = f"{fig.value:,}" if isinstance(fig.value, int) or fig.value >= 1e5 else f"{fig.value:g}"
        lines.append(f"  published{where}: {fig.metric} = {value}, basis {fig.basis_name} "
                     f"({fig.source}{'; ' + fig.note if fig.note else ''})")
    if entry.hardware:
        lines.append(f"  published hardware: {entry.hardware}")
    if entry.expect:
        lines.append(f"  expect here: {entry.expect}")
    for decision in entry.decisions:
        lines.append(f"  decision: {decision}")
    return "\n".join(lines)


def print_run_summary(records: list[dict[str, Any]], path: Path | None) -> None:
    for rec in records:
        m = rec["metrics"]
        if rec["status"] != "ok":
            why = "; ".join(rec.get("notes", []))
            click.echo(f"{Arm.of(rec)} repeat {rec['repeat']}: {rec['status']}"
                       + (f" ({why})" if why else ""))
            continue
        click.echo(f"{Arm.of(rec)} repeat {rec['repeat']}: "
                   f"train {fmt(m.get('train_s'))} s, warm-up {fmt(m.get('warmup_s'))} s, "
                   f"step {fmt(m.get('step_time_ms_median'), 1)} ms "
                   f"(p90 {fmt(m.get('step_time_ms_p90'), 1)}), "
                   f"{fmt(m.get('throughput_samples_per_s'), 1)} samples/s, "
                   f"acc {fmt(m.get('test_accuracy_pct'), 1)} % on {rec['config'].get('data_source')} data")
    if records and (rule := records[-1].get("stopping")):
        click.echo(f"repeats auto: {rule['rounds']} round(s) in {rule['elapsed_s']:.0f} s, stopped by "
                   f"{rule['stopped_by']} (budget {rule['budget_s']:g} s, at most "
                   f"±{rule['halfwidth'] * 100:g} % after {stopping.PRECISION_ROUNDS} rounds); 95 % half-widths: "
                   f"{stopping.describe_widths(rule['widths'])}")
    if path:
        click.echo(f"wrote {path}")


def write_report(results_dir: Path, out_dir: Path | None = None, formats=FORMATS, only=None,
                 against: Path | None = None, note: str = "", strict: bool = False):
    """report.md (+ PNG plots), report.csv, report.html; returns report_doc.Written(paths, loaded, drift).
    With `against`, a drift table against that reference; a reference of another machine class gives none,
    and `drift_skipped` says why (only a reference without usable records raises ConfigError)."""
    from pipelines.core.report import document

    return document.write(results_dir, out_dir, formats, only, against, note, strict)


def summary_table(results_dir: Path, strict: bool = False) -> str:
    """The compact table `make demo` and `accel report` print: one line per arm, with its verdict."""
    from pipelines.core.report import document

    return document.summary(results_dir, strict)
