"""The report's sections, assembled from rows, tables and plots into one document (report/render.py's `Doc`).

Section order follows a reader's questions: on what machine, did the ratios reproduce (with their
intervals), what happened to accuracy (a learning check unless book scale on real data), did anything
drift against the reference, how much does the harness cost, and what did each entry decide.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from pipelines.core.record import atomic, machine_class
from pipelines.core.report import summary, trend
from pipelines.core.report.drift import Drift, Judged, judge, view as drift_view
from pipelines.core.report.plots import all_plots
from pipelines.core.report.shares import share_rows
from pipelines.core.stats import bases
from pipelines.core.stats.bases import harness, profile_share
from pipelines.core.stats import intervals
from pipelines.core.report import tables
from pipelines.core.report.render import Doc, html_page, markdown
from pipelines.core.record.results import Loaded
from pipelines.core.stats.rows import Row
from pipelines.core.config.arm import Arm

INTRO = ("Ratios are throughput ratios (variant / baseline), i.e. baseline time / variant time for the same work, "
         "with a 95 % interval: paired where the arms ran side by side (blocks of one process, or processes of one "
         "round) Student's t over the processes' mean log ratios, else a two-level bootstrap of repeats and steps, "
         "at least Welch's t over processes. A verdict needs 3+ processes per arm and is conclusive only when the "
         "interval is: inside the band on the published effect (half to 1.5 times it in log terms, never narrower "
         "than ±5 % nor wider than ±15 %, or the figure's own margin or stated range) -> reproduced; entirely "
         "above / below -> faster / slower than published; otherwise inconclusive. Every judged line says what was "
         "seen in one sentence: the band, whether the effect's direction is seen, and for an inconclusive one how "
         "many rounds would decide it. Each verdict is at 95 % and none is corrected for the others: among a "
         "report's 15-20 verdicts (chapter 6's eight arms share one baseline) about one conclusive word may be "
         "wrong by chance. Records without per-step times have no interval. Timings are reported, never asserted.")


class Written(NamedTuple):
    paths: list[Path]
    judged: Judged


def write(results_dir: Path, out_dir: Path | None, formats, only: list[str] | None = None,
          against: Path | None = None, note: str = "", strict: bool = False) -> Written:
    """report.md (+ PNG plots beside it), report.csv, report.html into out_dir (default: results_dir).

    A reference of another machine class still gives the whole report: no drift table, and
    `drift_skipped` (also in report.md) says why, the two classes side by side. A reference that cannot
    be read at all is a ConfigError raised before out_dir is created, so a refusal leaves no empty folder."""
    judged = judge(results_dir, only, against, strict)
    rows, loaded, drift, skipped = judged
    out_dir = Path(out_dir or results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = out_dir if ("md" in formats or "html" in formats) else None
    doc = build(results_dir, rows, loaded, drift, note, plots, skipped, only)
    render = {"md": ("report.md", lambda: markdown(doc)),
              "csv": ("report.csv", lambda: tables.frame(rows).to_csv(index=False)),
              "html": ("report.html", lambda: html_page(doc, out_dir))}
    paths = []
    for kind in (k for k in render if k in formats):
        name, text = render[kind]
        paths.append(out_dir / name)
        atomic.write_text(paths[-1], text())  # a reader never sees half a report
    if "html" in formats:  # every run a point over time, change points drawn
        paths.append(atomic.write_text(out_dir / "trend.html", trend.page(loaded.records)))
    paths += [out_dir / block[1] for block in doc.blocks if block[0] == "img"]
    return Written(paths, judged)


NO_DATA_SOURCE = "not recorded"
DRIFT_SKIPPED = "Drift check skipped"  # report.md's line; ci/reference-timings.sh looks for it


def data_source(config: dict[str, Any]) -> str | None:
    """The data a record trained on: its `data_source`, or "synthetic" when only its dataset says so.
    None for a record that names no data (the runner writes data_source into ok records only, from the
    loaders it built; a skipped, interrupted or error record has none), so it adds nothing to the line."""
    source = config.get("data_source")
    if source:
        return str(source)
    return "synthetic" if config.get("dataset") == "synthetic" else None


def machines(records: list[dict[str, Any]]) -> list[str]:
    """One line per machine class: hardware, torch, image, threads, OpenMP, data sources, commits. A
    machine none of whose records names its data says "data not recorded", never "data None"."""
    out: dict[tuple, dict[str, Any]] = {}
    for rec in records:
        env, cfg = rec["env"], rec["config"]
        image = (env.get("image") or {}).get("target") or "host (no image)"
        line = f"{summary.hardware(env)}; torch {env.get('torch')}; {image}"
        item = out.setdefault(machine_class.key(env, software=True), {"line": line, "threads": set(), "omp": set(),
                                                                      "data": set(), "git": set()})
        item["threads"].add(str(env.get("torch_threads")))
        item["omp"].add(str(env.get("openmp_runtime")))
        if data_source(cfg) is not None:
            item["data"].add(data_source(cfg))
        item["git"].add(str(env.get("git_commit"))[:10] + ("+dirty" if env.get("git_dirty") else ""))
    return [f"{m['line']}; torch threads {'/'.join(sorted(m['threads']))}; "
            f"OpenMP {'/'.join(sorted(m['omp']))}; "
            f"data {'/'.join(sorted(m['data'])) or NO_DATA_SOURCE}; "
            f"commit {'/'.join(sorted(m['git']))}" for m in out.values()]


def build(results_dir: Path, rows: list[Row], loaded: Loaded, drift: Drift | None = None,
          note: str = "", plots_dir: Path | None = None, drift_skipped: str | None = None,
          only: list[str] | None = None) -> Doc:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc = Doc("Published vs reproduced")
    doc.add("p", f"Generated {stamp} from {loaded.files} result file(s), {len(loaded.records)} record(s) "
                 f"under `{results_dir}`.")
    if note:
        doc.add("p", f"**Note:** {note}")
    summary.add(doc, rows, summary.machine_summary(loaded.records), plots_dir)  # the answer first
    doc.add("h", "How to read it")
    doc.add("p", INTRO)
    doc.add("h", "Machines")
    doc.add("list", machines(loaded.records) or ["(no records)"])
    doc.add("h", "Results")
    if rows:
        doc.add("table", tables.results_view(tables.frame(rows)))
    else:
        doc.add("p", f"No usable records under `{results_dir}`: nothing to compare yet.")
    _machine_state(doc, rows)
    _bases(doc, rows)
    _accuracy(doc, rows)
    _profile_shares(doc, loaded.records, only)
    if drift is not None:
        _drift(doc, drift)
    elif drift_skipped:
        doc.add("h", "Drift against the reference")
        doc.add("p", f"{DRIFT_SKIPPED}: {drift_skipped}.")
    _harness(doc, loaded.records)
    if plots_dir is not None:
        doc.add("h", "Plots")
        for path, caption in all_plots(rows, loaded.records, plots_dir):
            doc.add("img", path.name, caption)
    _notes(doc, rows)
    problems = [f"error: {Arm.of(r)}: {e}" for r in rows for e in r.errors]
    problems += [f"interrupted: {Arm.of(r)} {i}" for r in rows for i in r.interrupted]
    skipped = loaded.skipped + ([f"(reference) {s}" for s in drift.loaded.skipped] if drift else [])
    if problems or skipped:
        doc.add("h", "Errors and skipped input")
        doc.add("list", problems + [f"skipped: {s}" for s in skipped])
    return doc


def _machine_state(doc: Doc, rows: list[Row]) -> None:
    """Noisy arms (the machine state in their records) and energy per sample beside throughput."""
    measured = [r for r in rows if r.records]
    if not measured:
        return
    doc.add("h", "Machine state and energy")
    doc.add("p", "A repeat is noisy when other processes kept more than a quarter of a usable core busy, the CPU "
                 "throttled, or the machine swapped while it ran (the record's `machine` field). `accel report "
                 "--strict` gives no conclusive verdict from such arms. Energy per sample comes from RAPL "
                 "(/sys/class/powercap) or NVML where a counter is readable, never estimated.")
    doc.add("table", tables.machine_view(measured))
    unread = sorted({r.energy_note for r in measured if r.energy_note})
    if unread:
        doc.add("p", "Energy " + "; ".join(unread) + ".")
    by_key = {(r.experiment, r.variant, r.scale): r for r in rows}
    costly = []
    for row in measured:
        base = by_key.get(row.base_key) if row.base_key else None
        if base is None or None in (row.ratio, row.energy_j_per_sample, base.energy_j_per_sample):
            continue
        if row.ratio > 1 and row.energy_j_per_sample > base.energy_j_per_sample:
            costly.append(f"{Arm.of(row)} is faster ({intervals.fmt(row.ratio)}x) but costs more "
                          f"energy per sample ({row.energy_j_per_sample:.4g} J vs {base.energy_j_per_sample:.4g} J "
                          f"for {base.variant})")
    if costly:
        doc.add("list", costly)


def _bases(doc: Doc, rows: list[Row]) -> None:
    """The sections of the bases that have more than a ratio (stats/bases: a memory saving), each in its words."""
    for title, introduction, table in bases.report_sections(rows):
        doc.add("h", title)
        doc.add("p", introduction)
        doc.add("table", pd.DataFrame(table))


def _accuracy(doc: Doc, rows: list[Row]) -> None:
    learning = tables.accuracy_view(rows)
    if learning.empty:
        return
    doc.add("h", "Accuracy")
    doc.add("p", "Measured accuracy is a learning check: it is compared between arms only when they saw the "
                 "same number of training samples, and with the published figure only at book scale on the "
                 "real data set (the next table), never at bench scale or on generated data.")
    doc.add("table", learning)
    book = tables.book_accuracy_view(rows)
    if book.empty:
        doc.add("p", "No arm ran at book scale on real data: no accuracy is compared with a published one.")
    else:
        doc.add("sub", "Against the published accuracy (book scale, real data)")
        doc.add("table", book)


def _profile_shares(doc: Doc, records: list[dict[str, Any]], only: list[str] | None) -> None:
    """Every printed op share against the profiles the records hold (pipelines/core/report/shares.py); a
    profile is a measurement with no throughput, so it has no row in Results and is judged here."""
    judged = share_rows(records, only)
    if not judged:
        return
    doc.add("h", "Profile shares")
    doc.add("p", "Each op share the book printed (self CPU time, PyTorch 2.0.0) against the mean share the "
                 "recorded profiles give the same op; a printed name torch renamed is looked up under today's "
                 "(aten::_reshape_alias as aten::view, CompiledFunction with its '## Call CompiledFxGraph' "
                 "record), an op absent from the profile counts 0 %. Band: max("
                 f"{profile_share.FLOOR_PP:g} point, {profile_share.RELATIVE:.0%} of the share) in "
                 "percentage points, the spread of the book's own two profiles of the same forward pass; a "
                 "one-call profile on another CPU and torch shows where the time goes, not a speed.")
    doc.add("table", pd.DataFrame([row.cells() for row in judged]))
    differs = [row for row in judged if row.verdict == profile_share.DIFFERS]
    doc.add("p", f"{len(judged) - len(differs)} of {len(judged)} shares match"
                 + (": differ " + ", ".join(f"{Arm.of(r)} {r.op}"
                                            for r in differs) if differs else "") + ".")


def _drift(doc: Doc, drift: Drift) -> None:
    doc.add("h", "Drift against the reference")
    doc.add("p", f"Reference `{drift.reference}` on " + " | ".join(machines(drift.loaded.records)) +
                 ". A reversed conclusive verdict (faster <-> slower than published) and a reproduction lost or "
                 "gained (reproduced <-> faster or slower) fail `--fail-on-reversal`; other differences are drift.")
    if drift.data.empty:
        doc.add("p", "No arm has a ratio in this run or the reference.")
    else:
        doc.add("table", drift_view(drift.data))
    doc.add("p", ("Changed: " + "; ".join(drift.reversals)) if drift.reversals else
                 "No conclusive verdict reversed, no reproduction lost or gained.")


def _harness(doc: Doc, records: list[dict[str, Any]]) -> None:
    table = tables.harness(records)
    if table is None:
        return
    column = f"against the {harness.GOAL_PCT:g} % goal"
    by_verdict: dict[str, list[str]] = {}
    for workload, verdict in zip(table["workload"], table[column]):
        by_verdict.setdefault(verdict, []).append(workload)
    wording = {harness.GOAL_MET: "Goal met (the overhead interval's upper end within the goal)",
               harness.OVER_GOAL: "Over the goal (the whole interval above it)",
               intervals.INCONCLUSIVE: "Inconclusive (the interval straddles the goal, or too few repeats)",
               harness.NOT_ASSESSED: "Not assessed (no interval)"}
    doc.add("h", "Harness overhead")
    doc.add("table", table)
    doc.add("p", "The shared loop (pipelines/core/train/loop.py) against a minimal hand-written loop on the same "
                 "work, arms interleaved (ci/harness-overhead.py); goal: overhead within "
                 f"{harness.GOAL_PCT:g} %, judged by the overhead's 95 % interval, never by its point value. "
                 "A negative overhead is the harness loop measuring faster than the plain loop: noise, not a "
                 "negative cost. "
                 + " ".join(f"{text} on this run: {', '.join(by_verdict[v])}." for v, text in wording.items()
                            if v in by_verdict)
                 + " Timings are noisy and never asserted.")


def _notes(doc: Doc, rows: list[Row]) -> None:
    seen = list({r.entry.id: r.entry for r in rows if r.entry is not None}.values())
    if not seen:
        return
    doc.add("h", "What to expect, and decisions")
    for entry in seen:
        items = [f"compares: {entry.compares}"]
        if entry.hardware:
            items.append(f"published hardware: {entry.hardware}")
        items.append(f"expect here: {entry.expect or 'no band stated'}")
        for fig in entry.published:  # each judged figure's band, in its basis's words
            basis = bases.of(fig)
            said = basis.band_text(fig) if basis is not None and fig.basis != "context" else ""
            if said:
                items.append(f"{basis.NAME}: {fig.metric}{f' [{fig.variant}]' if fig.variant else ''} {said}")
        items += [f"decision: {d}" for d in entry.decisions]
        doc.add("sub", entry.id)
        doc.add("list", items)

