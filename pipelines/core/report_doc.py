"""The report as a document: headed sections of paragraphs, tables, lists and images.

One document is rendered to Markdown (report.md), HTML (report.html, images embedded) and the rows to
CSV (report.csv), so the three outputs never disagree. Plots are written next to the Markdown.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.core import report_rows
from pipelines.core.envinfo import machine_key
from pipelines.core.report_rows import Row, stat

HARNESS_GOAL_PCT = 2.0
MAIN_HEADER = ("experiment", "variant", "scale", "n", "published time", "published ratio", "band",
               "samples/s (mean ± sd)", "train s (mean ± sd)", "acc %", "measured ratio", "verdict", "why")
TRADEOFF_HEADER = ("experiment", "variant", "published time", "published acc %", "published ratio",
                   "measured ratio", "measured acc %", "Δacc published (pp)", "Δacc measured (pp)")


@dataclass
class Doc:
    title: str
    # ("h", text) ("sub", text) ("p", text) ("table", header, rows) ("list", items) ("img", file, caption)
    blocks: list[tuple] = field(default_factory=list)

    def add(self, *block) -> None:
        self.blocks.append(block)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main_rows(rows: list[Row], against: dict[tuple, Row] | None = None) -> list[list[str]]:
    out = []
    for r in rows:
        cells = [r.experiment, r.variant, r.scale, str(r.n), r.published_time, _ratio(r.published_ratio),
                 r.band, r.throughput.text(), r.train_s.text(2), r.accuracy.text(), _ratio(r.ratio),
                 r.verdict, r.why]
        if against is not None:
            ref = against.get((r.experiment, r.variant, r.scale))
            cells += [ref.throughput.text(), _ratio(ref.ratio), ref.verdict] if ref else ["-", "-", "not run"]
        out.append(cells)
    return out


def by_key(rows: list[Row]) -> dict[tuple, Row]:
    return {(r.experiment, r.variant, r.scale): r for r in rows}


def tradeoff_rows(rows: list[Row]) -> list[Row]:
    """Arms of experiments whose source reports both a time and an accuracy (any arm)."""
    def reports_both(entry) -> bool:
        metrics = {f.metric for f in entry.published}
        return "test_accuracy_pct" in metrics and any("time" in m for m in metrics)

    return [r for r in rows if r.entry is not None and reports_both(r.entry)]


def accuracy_delta(row: Row, rows_by_key: dict[tuple, Row]) -> tuple[float | None, float | None]:
    """(published, measured) accuracy difference to the baseline arm, in percentage points."""
    base = report_rows.baseline_key(row.entry, row.variant) if row.entry else None
    if base is None:
        return (0.0 if row.published_accuracy is not None else None,
                0.0 if row.accuracy.mean is not None else None)
    base_row = rows_by_key.get((*base, row.scale)) or rows_by_key.get((*base, "-"))
    if base_row is None:
        return None, None
    pub = None if None in (row.published_accuracy, base_row.published_accuracy) else \
        row.published_accuracy - base_row.published_accuracy
    mea = None if None in (row.accuracy.mean, base_row.accuracy.mean) else \
        row.accuracy.mean - base_row.accuracy.mean
    return pub, mea


def harness(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Shared loop vs hand-written loop throughput, from ci/harness-overhead.py's records."""
    recs = [r for r in records if r["experiment"] == report_rows.HARNESS_ID and r["status"] == "ok"]
    shared = stat(r["metrics"].get("throughput_samples_per_s") for r in recs if r["variant"] == "shared-loop")
    hand = stat(r["metrics"].get("throughput_samples_per_s") for r in recs if r["variant"] == "hand-loop")
    if not shared.mean or not hand.mean:
        return None
    ratio = shared.mean / hand.mean
    return {"shared": shared, "hand": hand, "ratio": ratio, "overhead_pct": (1 - ratio) * 100}


def machines(records: list[dict[str, Any]]) -> list[str]:
    out = {}
    for rec in records:
        env, cfg = rec["env"], rec["config"]
        image = (env.get("image") or {}).get("target") or "host (no image)"
        gpus = ", ".join(g["name"] for g in env.get("gpus") or []) or "no GPU"
        line = (f"{env.get('cpu_model')} ({env.get('logical_cpus')} logical CPUs), {gpus}; torch "
                f"{env.get('torch')}; {image}")
        item = out.setdefault(machine_key(env), {"line": line, "threads": set(), "omp": set(), "data": set(),
                                                 "git": set()})
        item["threads"].add(str(env.get("torch_threads")))
        item["omp"].add(str(env.get("openmp_runtime")))
        item["data"].add(str(cfg.get("data_source")))
        item["git"].add(str(env.get("git_commit"))[:10] + ("+dirty" if env.get("git_dirty") else ""))
    return [f"{m['line']}; torch threads {'/'.join(sorted(m['threads']))}; "
            f"OpenMP {'/'.join(sorted(m['omp']))}; "
            f"data {'/'.join(sorted(m['data']))}; commit {'/'.join(sorted(m['git']))}" for m in out.values()]


def build(results_dir: Path, only: list[str] | None = None, against: Path | None = None, note: str = "",
          plots_dir: Path | None = None) -> tuple[Doc, list[Row], report_rows.Loaded]:
    loaded = report_rows.load(results_dir)
    rows = report_rows.build(loaded, only)
    ref_rows, ref_loaded = None, None
    if against is not None:
        ref_loaded = report_rows.load(against)
        ref_rows = by_key(report_rows.build(ref_loaded, only))
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc = Doc("Published vs reproduced")
    doc.add("p", f"Generated {stamp} from {loaded.files} result file(s), {len(loaded.records)} record(s) "
                 f"under `{results_dir}`. Ratios are throughput ratios (variant / baseline), i.e. "
                 "baseline time / variant time for the same work; 'reproduced' means inside the band (published ratio ± the "
                 "catalog's tolerance). Timings are reported, never asserted.")
    if note:
        doc.add("p", f"**Note:** {note}")
    doc.add("h", "Machines")
    doc.add("list", machines(loaded.records) or ["(no records)"])
    doc.add("h", "Results")
    header = list(MAIN_HEADER)
    if ref_rows is not None:
        header += ["ref samples/s", "ref ratio", "ref verdict"]
    if rows:
        doc.add("table", header, main_rows(rows, ref_rows))
    else:
        doc.add("p", f"No usable records under `{results_dir}`: nothing to compare yet.")
    if ref_rows is not None:
        doc.add("p", f"`ref` columns: the reference run in `{against}` on " +
                     " | ".join(machines(ref_loaded.records) or ["(no records)"]) +
                     ". Compare ratios, not samples/s, across machines.")
    _tradeoff(doc, rows, plots_dir)
    _harness(doc, loaded.records)
    if plots_dir is not None:
        from pipelines.core import report_plots

        for path, caption in report_plots.all_plots(rows, loaded.records, plots_dir):
            doc.add("img", path.name, caption)
    _notes(doc, rows)
    problems = [f"{r.experiment} [{r.variant}]: {e}" for r in rows for e in r.errors]
    skipped = loaded.skipped + ([f"(reference) {s}" for s in ref_loaded.skipped] if ref_loaded else [])
    if problems or skipped:
        doc.add("h", "Errors and skipped input")
        doc.add("list", [f"error: {p}" for p in problems] + [f"skipped: {s}" for s in skipped])
    return doc, rows, loaded


def _tradeoff(doc: Doc, rows: list[Row], plots_dir: Path | None) -> None:
    chosen = tradeoff_rows(rows)
    if not chosen:
        return
    keyed = by_key(rows)
    doc.add("h", "Accuracy vs speed")
    table = []
    for r in chosen:
        pub, mea = accuracy_delta(r, keyed)
        table.append([r.experiment, r.variant, r.published_time, _num(r.published_accuracy),
                      _ratio(r.published_ratio),
                      _ratio(r.ratio if r.verdict != "baseline" else 1.0 if r.n else None), r.accuracy.text(),
                      _num(pub, signed=True), _num(mea, signed=True)])
    doc.add("table", list(TRADEOFF_HEADER), table)
    doc.add("p", "Measured accuracies at bench scale come from a few training steps on the data at hand "
                 "(often generated data); compare their direction across arms, not their level with the "
                 "book's.")


def _num(value: float | None, signed: bool = False) -> str:
    return "-" if value is None else (f"{value:+.2f}" if signed else f"{value:.2f}")


def _harness(doc: Doc, records: list[dict[str, Any]]) -> None:
    result = harness(records)
    if result is None:
        return
    shared, hand = result["shared"], result["hand"]
    verdict = "within" if result["overhead_pct"] <= HARNESS_GOAL_PCT else "outside"
    doc.add("h", "Harness overhead")
    doc.add("table", ["loop", "n", "samples/s (mean ± sd)"],
            [["shared loop (pipelines/core/loop.py)", str(shared.n), shared.text()],
             ["minimal hand-written loop", str(hand.n), hand.text()]])
    doc.add("p", f"shared / hand-written throughput = {result['ratio']:.3f} "
                 f"(overhead {result['overhead_pct']:+.1f} %; "
                 f"goal {HARNESS_GOAL_PCT:g} %: {verdict} on this run; timings are noisy, not asserted).")


def _notes(doc: Doc, rows: list[Row]) -> None:
    seen = []
    for r in rows:
        if r.entry is not None and r.entry not in seen:
            seen.append(r.entry)
    if not seen:
        return
    doc.add("h", "What to expect, and decisions")
    for entry in seen:
        items = [f"compares: {entry.compares}"]
        if entry.hardware:
            items.append(f"published hardware: {entry.hardware}")
        items.append(f"expect here: {entry.expect or 'no band stated'} (tolerance ±{entry.tolerance:.0%})")
        items += [f"decision: {d}" for d in entry.decisions]
        doc.add("sub", entry.id)
        doc.add("list", items)

