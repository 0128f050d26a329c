"""Report rows from result files: one row per experiment arm and scale, measured beside published.

The compared quantity is throughput (samples per second of training, data loading included), so a
measured ratio means what the book's ratio of training times means for a fixed number of epochs:
baseline_time / variant_time = variant_throughput / baseline_throughput (ratio of the means over
repeats), whatever the batch size. A ratio is only computed between records of the same scale whose
machine, torch and image agree (`envinfo.machine_key`); otherwise the row says which of them differ.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.core import experiments, results
from pipelines.core.config import ConfigError
from pipelines.core.envinfo import machine_key

MACHINE_FIELDS = ("CPU model", "logical CPUs", "torch", "image target", "image lock", "GPUs")
HARNESS_ID = "harness-overhead"  # written by ci/harness-overhead.py; shown in its own section


@dataclass
class Loaded:
    records: list[dict[str, Any]]
    skipped: list[str]  # "file[:line]: reason" for everything that could not be used
    files: int


def load(results_dir: Path) -> Loaded:
    """Every valid record under results_dir (sub-folders too, except reference/ ones); damaged lines
    and unknown schemas are skipped, each with a reason."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ConfigError(f"results dir {root} does not exist; run an experiment first "
                          "(e.g. make <id> ARGS='--scale bench') or pass --results-dir")
    records, skipped, files = [], [], 0
    for path in sorted(root.glob("**/*.jsonl")):
        if "reference" in path.relative_to(root).parts[:-1]:
            continue  # committed reference runs are compared with --against, never mixed in
        files += 1
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            skipped.append(f"{path}: unreadable ({exc.__class__.__name__})")
            continue
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise results.SchemaError("not a JSON object")
                results.validate(record)
            except json.JSONDecodeError as exc:
                skipped.append(f"{path}:{number}: not JSON ({exc.msg}); half-written or damaged")
                continue
            except results.SchemaError as exc:
                skipped.append(f"{path}:{number}: {exc}")
                continue
            records.append(record)
    return Loaded(records, skipped, files)


@dataclass
class Stat:
    n: int = 0
    mean: float | None = None
    sd: float | None = None

    def text(self, digits: int = 1) -> str:
        if self.mean is None:
            return "-"
        sd = f" ± {self.sd:.{digits}f}" if self.sd is not None else ""
        return f"{self.mean:.{digits}f}{sd}"


def stat(values) -> Stat:
    values = [float(v) for v in values if isinstance(v, (int, float))]
    if not values:
        return Stat()
    return Stat(len(values), statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None)


@dataclass
class Row:
    experiment: str
    variant: str
    scale: str = "-"
    entry: experiments.Experiment | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    throughput: Stat = field(default_factory=Stat)
    train_s: Stat = field(default_factory=Stat)
    step_ms: Stat = field(default_factory=Stat)
    accuracy: Stat = field(default_factory=Stat)
    published_time: str = "-"
    published_time_s: float | None = None
    published_accuracy: float | None = None
    published_ratio: float | None = None
    ratio: float | None = None
    band: str = "-"
    verdict: str = "not run"
    why: str = ""
    errors: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.records)

    @property
    def family(self) -> str:
        return self.experiment.split("-")[0]


def published_times(entry: experiments.Experiment, variant: str) -> list[tuple[str, float]]:
    """(text, seconds) of the published training times of one arm."""
    out = []
    for fig in entry.published:
        unit = fig.metric.rsplit("_", 1)[-1]
        if "time" not in fig.metric or unit not in ("s", "min") or not _fig_applies(entry, fig, variant):
            continue
        out.append((f"{fig.value:g} {unit}", fig.value * (60 if unit == "min" else 1)))
    return out


def _fig_applies(entry: experiments.Experiment, fig: experiments.Published, variant: str) -> bool:
    return fig.variant == variant or (fig.variant is None and not entry.has_variants)


def published(entry: experiments.Experiment, metric: str, variant: str) -> float | None:
    return entry.published_value(metric, variant if entry.has_variants else None)


def baseline_key(entry: experiments.Experiment, variant: str) -> tuple[str, str] | None:
    """`id` or `id@variant` from the catalog; a variant of the same experiment compares to its first arm."""
    if entry.baseline:
        base_id, _, base_variant = entry.baseline.partition("@")
        base = experiments.all_experiments().get(base_id)
        return (base_id, base_variant or (base.variants[0].name if base else "default"))
    first = entry.variants[0].name
    return (entry.id, first) if variant != first else None


def machine_difference(records: list[dict[str, Any]]) -> str:
    """'' when every record ran on one machine/torch/image, else what differs."""
    keys = {machine_key(r["env"]) for r in records}
    if len(keys) < 2:
        return ""
    parts = []
    for index, name in enumerate(MACHINE_FIELDS):
        values = sorted({str(k[index]) for k in keys})
        if len(values) > 1:
            parts.append(f"{name} {' vs '.join(values)}")
    return "runs differ in " + "; ".join(parts)


def hardware_class(entry: experiments.Experiment) -> str:
    return "gpu" if entry.target == "cuda" or "gpu" in entry.requires else "cpu"


def run_class(records: list[dict[str, Any]]) -> str:
    return "gpu" if any(r["config"].get("device") == "cuda" for r in records) else "cpu"


def build(loaded: Loaded, only: list[str] | None = None) -> list[Row]:
    """Rows for every catalog arm that has records, plus 'not run' rows for the ids named in `only`."""
    entries = experiments.all_experiments()
    ok: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    errors: dict[tuple[str, str], list[str]] = defaultdict(list)
    for rec in loaded.records:
        if rec["experiment"] == HARNESS_ID:
            continue
        if rec["status"] == "ok" and rec["metrics"].get("throughput_samples_per_s"):
            ok[(rec["experiment"], rec["variant"], rec["scale"])].append(rec)
        elif rec["status"] == "error":
            err = rec.get("error") or {}
            errors[(rec["experiment"], rec["variant"])].append(
                f"{err.get('type', 'error')}: {str(err.get('message', ''))[:160]}")
    order = {exp: index for index, exp in enumerate(entries)}  # catalog order; unknown ids last
    wanted = sorted(set(only or []) | {k[0] for k in ok} | {k[0] for k in errors},
                    key=lambda exp: (order.get(exp, len(order)), exp))
    rows = []
    for exp in wanted:
        entry = entries.get(exp)
        arms = [a.name for a in entry.variants] if entry else sorted({k[1] for k in ok if k[0] == exp})
        for variant in arms:
            scales = sorted({k[2] for k in ok if k[:2] == (exp, variant)}) or ["-"]
            for scale in scales:
                row = Row(exp, variant, scale, entry, ok.get((exp, variant, scale), []),
                          errors=errors.get((exp, variant), []))
                _fill(row, ok)
                rows.append(row)
    return rows


def _fill(row: Row, ok) -> None:
    recs, entry = row.records, row.entry
    metric = lambda name: [r["metrics"].get(name) for r in recs]  # noqa: E731
    row.throughput, row.train_s = stat(metric("throughput_samples_per_s")), stat(metric("train_s"))
    row.step_ms, row.accuracy = stat(metric("step_time_ms_median")), stat(metric("test_accuracy_pct"))
    if entry is None:
        row.verdict, row.why = ("not in catalog", "no published figures") if recs else ("not run", "")
        return
    times = published_times(entry, row.variant)
    row.published_time = ", ".join(t for t, _ in times) or "-"
    row.published_time_s = times[0][1] if times else None
    row.published_accuracy = published(entry, "test_accuracy_pct", row.variant)
    row.published_ratio = published(entry, "ratio", row.variant)
    if row.published_ratio is not None:
        low, high = row.published_ratio * (1 - entry.tolerance), row.published_ratio * (1 + entry.tolerance)
        row.band = f"{low:.2f}-{high:.2f}"
    base = baseline_key(entry, row.variant)
    if not recs:
        row.verdict = "not run"
        row.why = (f"error: {row.errors[-1]}" if row.errors else
                   f"planned: {entry.planned_reason}" if entry.status == "planned" else "no records")
        return
    if base is None:
        row.verdict, row.why = "baseline", "the reference arm (ratio 1 by definition)"
        return
    base_recs = ok.get((*base, row.scale), [])
    if not base_recs:
        row.verdict = "not comparable"
        row.why = f"baseline {base[0]} [{base[1]}] not run at {row.scale} scale"
        return
    difference = machine_difference(recs + base_recs)
    if difference:
        row.verdict, row.why = "not comparable", f"no ratio: {difference}"
        return
    row.ratio = row.throughput.mean / stat(r["metrics"]["throughput_samples_per_s"] for r in base_recs).mean
    if hardware_class(entry) != run_class(recs):
        row.verdict = "not comparable"
        row.why = (f"different hardware class: published on {hardware_class(entry).upper()} "
                   f"({entry.hardware or 'unstated'}), run on {run_class(recs).upper()}")
    elif row.published_ratio is None:
        row.verdict, row.why = "measured", "nothing published to compare with"
    elif row.ratio > row.published_ratio * (1 + entry.tolerance):
        row.verdict = "faster than published"
    elif row.ratio < row.published_ratio * (1 - entry.tolerance):
        row.verdict = "slower than published"
    else:
        row.verdict = "reproduced"
