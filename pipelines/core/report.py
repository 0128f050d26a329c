"""Published vs reproduced, from result files only: the catalog map, run summaries, and the report.

The compared quantity is throughput (samples per second of training, data loading included), so a
ratio means what the book's ratio of training times means for a fixed number of epochs:
baseline_time / variant_time = variant_throughput / baseline_throughput, whatever the batch size.
Rows and verdicts: report_rows.py; the document: report_doc.py; plots: report_plots.py; HTML:
report_html.py. This module renders Markdown and CSV and writes the files.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import click

from pipelines.core import experiments


def published_ratio_text(entry: experiments.Experiment) -> str:
    ratios = [f"{f.value:g}" + (f"@{f.variant}" if f.variant else "") for f in entry.published
              if f.metric == "ratio"]
    return ", ".join(ratios) if ratios else "-"


def map_markdown() -> str:
    """The README map: id -> what it compares -> pipeline -> target -> launcher -> make -> published."""
    lines = ["| id | compares | pipeline | container | launcher | make target | published ratio | status |",
             "|---|---|---|---|---|---|---|---|"]
    for e in experiments.all_experiments().values():
        pipeline = f"`pipelines/{e.pipeline}.py`" if e.pipeline else "-"
        lines.append(f"| `{e.id}` | {e.compares} | {pipeline} | `{e.target}` | `{e.launcher}` | "
                     f"`make {e.id}` | {published_ratio_text(e)} | {e.status} |")
    return "\n".join(lines)


def describe(entry: experiments.Experiment) -> str:
    lines = [f"{entry.id}: {entry.compares}",
             f"  status {entry.status}; pipeline {entry.pipeline or '-'}; target {entry.target}; "
             f"launcher {entry.launcher}; baseline {entry.baseline or '-'}"]
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
        lines.append(f"  published{where}: {fig.metric} = {fig.value:g} ({fig.source}{'; ' + fig.note if fig.note else ''})")
    if entry.hardware:
        lines.append(f"  published hardware: {entry.hardware}")
    if entry.expect:
        lines.append(f"  expect here: {entry.expect}")
    for decision in entry.decisions:
        lines.append(f"  decision: {decision}")
    return "\n".join(lines)


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_run_summary(records: list[dict[str, Any]], path: Path | None) -> None:
    for rec in records:
        m = rec["metrics"]
        if rec["status"] != "ok":
            why = "; ".join(rec.get("notes", []))
            click.echo(f"{rec['experiment']} [{rec['variant']}] repeat {rec['repeat']}: {rec['status']}"
                       + (f" ({why})" if why else ""))
            continue
        click.echo(f"{rec['experiment']} [{rec['variant']}] repeat {rec['repeat']}: "
                   f"train {_fmt(m.get('train_s'), 2)} s, warm-up {_fmt(m.get('warmup_s'), 2)} s, "
                   f"step {_fmt(m.get('step_time_ms_median'))} ms (p90 {_fmt(m.get('step_time_ms_p90'))}), "
                   f"{_fmt(m.get('throughput_samples_per_s'))} samples/s, "
                   f"acc {_fmt(m.get('test_accuracy_pct'))} % on {rec['config'].get('data_source')} data")
    if path:
        click.echo(f"wrote {path}")


def _md_cell(value: str) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(header, rows) -> list[str]:
    return ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows)]


def markdown(doc) -> str:
    lines = [f"# {doc.title}", ""]
    for block in doc.blocks:
        kind = block[0]
        if kind == "h":
            lines += [f"## {block[1]}", ""]
        elif kind == "sub":
            lines += [f"### {block[1]}", ""]
        elif kind == "p":
            lines += [block[1], ""]
        elif kind == "list":
            lines += [f"- {item}" for item in block[1]] + [""]
        elif kind == "table":
            lines += markdown_table(block[1], block[2]) + [""]
        elif kind == "img":
            lines += [f"![{block[2]}]({block[1]})", ""]
    return "\n".join(lines).rstrip() + "\n"


CSV_FIELDS = ("experiment", "variant", "scale", "n", "published_time", "published_time_s", "published_ratio",
              "published_accuracy_pct", "band", "throughput_mean", "throughput_sd", "train_s_mean",
              "train_s_sd",
              "step_ms_mean", "accuracy_pct_mean", "accuracy_pct_sd", "measured_ratio", "verdict", "why")


def csv_text(rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in rows:
        writer.writerow([r.experiment, r.variant, r.scale, r.n, r.published_time, r.published_time_s,
                         r.published_ratio, r.published_accuracy, r.band, r.throughput.mean, r.throughput.sd,
                         r.train_s.mean, r.train_s.sd, r.step_ms.mean, r.accuracy.mean, r.accuracy.sd,
                         r.ratio,
                         r.verdict, r.why])
    return out.getvalue()


FORMATS = ("md", "csv", "html")


def write_report(results_dir: Path, out_dir: Path | None = None, formats=FORMATS, only=None,
                 against: Path | None = None, note: str = "") -> tuple[list[Path], Any]:
    """report.md (+ PNG plots beside it), report.csv, report.html into out_dir (default: results_dir)."""
    from pipelines.core import report_doc, report_html

    out_dir = Path(out_dir or results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = out_dir if ("md" in formats or "html" in formats) else None
    doc, rows, loaded = report_doc.build(results_dir, only, against, note, plots_dir=plots)
    written = []
    if "md" in formats:
        written.append(out_dir / "report.md")
        written[-1].write_text(markdown(doc), encoding="utf-8")
    if "csv" in formats:
        written.append(out_dir / "report.csv")
        written[-1].write_text(csv_text(rows), encoding="utf-8")
    if "html" in formats:
        written.append(out_dir / "report.html")
        written[-1].write_text(report_html.render(doc, out_dir), encoding="utf-8")
    written += [out_dir / b[1] for b in doc.blocks if b[0] == "img"]
    return written, loaded


def summary_table(results_dir: Path) -> str:
    """The compact table `make demo` and `accel report` print: one line per arm, with its verdict."""
    from pipelines.core import report_rows

    loaded = report_rows.load(results_dir)
    rows = report_rows.build(loaded)
    header = ("experiment", "variant", "n", "step ms", "samples/s (mean ± sd)", "acc %", "ratio",
              "published", "verdict")
    table = [(r.experiment, r.variant + ("" if r.scale in ("bench", "-") else f" ({r.scale})"), str(r.n),
              r.step_ms.text(), r.throughput.text(), r.accuracy.text(),
              "-" if r.ratio is None else f"{r.ratio:.2f}",
              "-" if r.published_ratio is None else f"{r.published_ratio:g}",
              r.verdict + (f" ({r.why})" if r.verdict == "not comparable" else "")) for r in rows]
    lines = markdown_table(header, table)
    if not rows:
        lines.append(f"(no successful runs under {results_dir})")
    lines += [f"- error: {r.experiment} [{r.variant}]: {e}" for r in rows for e in r.errors]
    lines += [f"- skipped: {s}" for s in loaded.skipped]
    lines += [f"- not run here: {r['experiment']} [{r['variant']}]: {'; '.join(r.get('notes', []))}"
              for r in loaded.records if r["status"] == "skipped"]
    return "\n".join(lines)
