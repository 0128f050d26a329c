"""Published vs reproduced, from result files only.

The compared quantity is throughput (samples per second of training, data loading included), so a
ratio means what the book's ratio of training times means for a fixed number of epochs:
baseline_time / variant_time = variant_throughput / baseline_throughput, whatever the batch size.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

import click

from pipelines.core import catalog, results
from pipelines.core.envinfo import machine_key


def published_ratio_text(entry: catalog.Experiment) -> str:
    ratios = [f"{f.value:g}" + (f"@{f.variant}" if f.variant else "") for f in entry.published
              if f.metric == "ratio"]
    return ", ".join(ratios) if ratios else "-"


def map_markdown() -> str:
    """The README map: id -> what it compares -> pipeline -> target -> launcher -> make -> published."""
    lines = ["| id | compares | pipeline | container | launcher | make target | published ratio | status |",
             "|---|---|---|---|---|---|---|---|"]
    for e in catalog.all_experiments().values():
        pipeline = f"`pipelines/{e.pipeline}.py`" if e.pipeline else "-"
        lines.append(f"| `{e.id}` | {e.compares} | {pipeline} | `{e.target}` | `{e.launcher}` | "
                     f"`make {e.id}` | {published_ratio_text(e)} | {e.status} |")
    return "\n".join(lines)


def describe(entry: catalog.Experiment) -> str:
    lines = [f"{entry.id}: {entry.compares}",
             f"  status {entry.status}; pipeline {entry.pipeline or '-'}; target {entry.target}; "
             f"launcher {entry.launcher}; baseline {entry.baseline or '-'}"]
    if entry.planned_reason:
        lines.append(f"  planned: {entry.planned_reason}")
    if entry.args:
        lines.append("  book settings: " + ", ".join(f"{k}={v}" for k, v in entry.args.items()))
    if entry.options or entry.knobs:
        lines.append("  options: " + ", ".join(f"{k}={v}" for k, v in {**entry.options, **entry.knobs}.items()))
    if entry.variants:
        lines.append("  variants: " + ", ".join(v.name for v in entry.variants))
    for fig in entry.published:
        where = f" [{fig.variant}]" if fig.variant else ""
        lines.append(f"  published{where}: {fig.metric} = {fig.value:g} ({fig.source}{'; ' + fig.note if fig.note else ''})")
    if entry.hardware:
        lines.append(f"  published hardware: {entry.hardware}")
    if entry.band:
        lines.append(f"  expect here: {entry.band}")
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


def load(results_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """All records under results_dir, and a list of files skipped with the reason."""
    records, skipped = [], []
    for path in sorted(Path(results_dir).glob("**/*.jsonl")):
        try:
            records.extend(results.read(path))
        except (results.SchemaError, OSError, UnicodeDecodeError) as exc:
            skipped.append(f"{path}: {exc}")
    return records, skipped


def group(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        if rec["status"] == "ok" and rec["metrics"].get("throughput_samples_per_s"):
            groups[(rec["experiment"], rec["variant"])].append(rec)
    return groups


def baseline_key(entry: catalog.Experiment, variant: str) -> tuple[str, str] | None:
    """`id` or `id@variant` from the catalog; a variant of the same experiment compares to its first arm."""
    if entry.baseline:
        base_id, _, base_variant = entry.baseline.partition("@")
        base = catalog.all_experiments().get(base_id)
        return (base_id, base_variant or (base.arms()[0].name if base else "default"))
    first = entry.arms()[0].name
    return (entry.id, first) if variant != first else None


def measured_ratio(groups, key, base_key) -> tuple[float | None, str]:
    if base_key is None or base_key not in groups:
        return None, "baseline not run"
    machines = {machine_key(r["env"]) for r in groups[key] + groups[base_key]}
    if len(machines) > 1:
        return None, "not comparable: runs differ in machine, torch or image"
    value = statistics.median(r["metrics"]["throughput_samples_per_s"] for r in groups[key])
    base = statistics.median(r["metrics"]["throughput_samples_per_s"] for r in groups[base_key])
    return value / base, ""


def summary_table(results_dir: Path) -> str:
    records, skipped = load(results_dir)
    groups = group(records)
    entries = catalog.all_experiments()
    header = ("experiment", "variant", "n", "step ms (median)", "samples/s", "acc %", "ratio", "published")
    rows = []
    for (exp, variant), recs in sorted(groups.items()):
        entry = entries.get(exp)
        ratio, why = (None, "not in catalog") if entry is None else \
            measured_ratio(groups, (exp, variant), baseline_key(entry, variant))
        published = None if entry is None else entry.published_value("ratio", None if not entry.variants
                                                                       else variant)
        accs = [r["metrics"].get("test_accuracy_pct") for r in recs if r["metrics"].get("test_accuracy_pct")
                is not None]
        rows.append((exp, variant, str(len(recs)),
                     _fmt(statistics.median(r["metrics"]["step_time_ms_median"] for r in recs)),
                     _fmt(statistics.median(r["metrics"]["throughput_samples_per_s"] for r in recs)),
                     _fmt(statistics.median(accs)) if accs else "-",
                     f"{ratio:.2f}" if ratio else (why if why != "baseline not run" or exp != variant else "-"),
                     "-" if published is None else f"{published:g}"))
    errors = [f"{r['experiment']} [{r['variant']}]: {r['error']['type']}: {r['error']['message'][:120]}"
              for r in records if r["status"] == "error"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if not rows:
        lines.append(f"(no successful runs under {results_dir})")
    lines += [f"- error: {e}" for e in errors] + [f"- skipped: {s}" for s in skipped]
    lines += [f"- not run here: {r['experiment']} [{r['variant']}]: {'; '.join(r.get('notes', []))}"
              for r in records if r["status"] == "skipped"]
    return "\n".join(lines)
