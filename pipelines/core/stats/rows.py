"""Report rows: one per experiment arm and scale, measured beside published, each with its verdict.

The compared quantity is throughput (samples per second of training, data loading included), so a
ratio means what the book's ratio of training times means for the same work: baseline_time /
variant_time = variant_throughput / baseline_throughput, whatever the batch size. An `interrupted` record
(a repeat stopped by Ctrl-C or SIGTERM) never enters a ratio: an arm with nothing else shows the verdict
"interrupted" and how far it got, an arm with finished repeats too says how many were left out.

Rows are flat dataclasses so that a table is `pandas.DataFrame(row.data() for row in rows)`: the CSV's
columns are these fields, in this order, then the flat keys of the bases that have more than a ratio
(`bases.field_names`: a memory saving, the counts), filled from `outcomes`; nothing else lists them.
This module groups the records by arm and fills each Row: what the arm measured, what its source published,
and the notes beside its verdict here; the verdict against the baseline arm from stats/judging.py.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, fields
from typing import Any

from pipelines.core.config import experiments
from pipelines.core.config.arm import Arm
from pipelines.core.record.results import Loaded
from pipelines.core.stats import bases, explain, intervals, judging, pairing
from pipelines.core.stats.bases import end_to_end, harness

HIDDEN = {"table": False}  # Row fields that are not table columns
INTERRUPTED = "interrupted"


@dataclass
class Row:
    experiment: str
    variant: str
    scale: str = "-"
    n: int = 0
    baseline: str = "-"  # "id [arm]" this arm is compared with, and why that arm
    published_time: str = "-"
    published_time_s: float | None = None
    published_ratio: float | None = None  # on the same-work basis the measured ratio has
    published_basis: str = "-"  # what the source's figure measured, and how it became published_ratio
    band_low: float | None = None
    band_high: float | None = None
    band_rule: str = ""  # why the band is where it is (config/effect.py rule_text)
    noisy_repeats: int = 0  # repeats whose machine state was flagged noisy (record/machine.py)
    noisy_reasons: str = ""  # why, as the records say (others' CPU share, throttling, swap)
    energy_j_per_sample: float | None = None  # mean over repeats where a counter was readable (record/energy.py)
    energy_note: str = ""  # "not measurable here: ..." when no repeat had one
    throughput_mean: float | None = None
    throughput_sd: float | None = None
    train_s_mean: float | None = None
    step_ms_median: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pairing: str = "-"  # how the interval paired this arm with its baseline (stats/record_pairing.py)
    verdict: str = "not run"
    why: str = ""
    cause: str = ""  # why the ratio is what it is, here and at the source (stats/explain.py): the "why" line
    judged: str = "-"  # which measured ratio the verdict judged: steady state, or end-to-end
    e2e_ratio: float | None = None  # the same arms' whole repeats, warm-up and compilation included
    e2e_ci_low: float | None = None
    e2e_ci_high: float | None = None
    data_source: str = "-"
    samples_seen: int | None = None
    accuracy_mean: float | None = None
    accuracy_sd: float | None = None
    published_accuracy: float | None = None
    accuracy_context: str = ""  # why the published accuracy is context only, never a delta (basis "context")
    # the results of the bases that have more than a ratio, by basis NAME (a memory saving, the counts)
    outcomes: dict[str, Any] = field(default_factory=dict, metadata=HIDDEN)
    entry: experiments.Experiment | None = field(default=None, metadata=HIDDEN)
    records: list[dict[str, Any]] = field(default_factory=list, metadata=HIDDEN)
    errors: list[str] = field(default_factory=list, metadata=HIDDEN)
    interrupted: list[str] = field(default_factory=list, metadata=HIDDEN)  # how far each stopped repeat got
    base_key: tuple[str, str, str] | None = field(default=None, metadata=HIDDEN)
    processes: int = field(default=0, metadata=HIDDEN)  # the fewest processes behind either side of the interval

    @classmethod
    def columns(cls) -> list[str]:
        return [*(f.name for f in fields(cls) if f.metadata.get("table", True)), *bases.field_names()]

    def data(self) -> dict[str, Any]:
        own = [f.name for f in fields(self) if f.metadata.get("table", True)]
        return {**{name: getattr(self, name) for name in own}, **bases.fields(self.outcomes)}

    @property
    def key(self) -> tuple[str, str, str]:
        return self.experiment, self.variant, self.scale

    @property
    def family(self) -> str:
        return self.experiment.split("-")[0]

    @property
    def interval(self) -> intervals.Interval | None:
        return None if self.ci_low is None else intervals.Interval(self.ci_low, self.ci_high)


def build(loaded: Loaded, only: list[str] | None = None, strict: bool = False) -> list[Row]:
    """Rows for every catalog arm that has records, plus 'not run' rows for the ids named in `only`.
    `strict`: no conclusive verdict from an arm or baseline with a repeat that ran on a noisy machine."""
    entries = experiments.all_experiments()
    ran: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    errors: dict[tuple[str, str], list[str]] = defaultdict(list)
    stopped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for rec in loaded.records:
        if harness.ours(rec):  # the harness-overhead check has its own section
            continue
        if rec["status"] == "ok" and rec["metrics"].get("throughput_samples_per_s"):
            ran[(rec["experiment"], rec["variant"], rec["scale"])].append(rec)
        elif rec["status"] == "error":
            err = rec.get("error") or {}
            errors[(rec["experiment"], rec["variant"])].append(
                f"{err.get('type', 'error')}: {str(err.get('message', ''))[:160]}")
        elif rec["status"] == INTERRUPTED:
            stopped[(rec["experiment"], rec["variant"])].append(
                f"repeat {rec['repeat']} ({rec['scale']}): {'; '.join(rec.get('notes', [])) or INTERRUPTED}")
    order = {exp: index for index, exp in enumerate(entries)}  # catalog order; unknown ids last
    wanted = sorted(set(only or []) | {k[0] for k in ran} | {k[0] for k in errors} | {k[0] for k in stopped},
                    key=lambda exp: (order.get(exp, len(order)), exp))
    rows = []
    for exp in wanted:
        entry = entries.get(exp)
        recorded = sorted({k[1] for k in ran if k[0] == exp})
        arms = [a.name for a in entry.variants] if entry else recorded
        arms += [arm for arm in recorded if arm not in arms]  # an arm the catalog has since renamed or dropped
        for variant in arms:
            for scale in sorted({k[2] for k in ran if k[:2] == (exp, variant)}) or ["-"]:
                row = Row(exp, variant, scale, entry=entry, records=ran.get((exp, variant, scale), []),
                          errors=errors.get((exp, variant), []), interrupted=stopped.get((exp, variant), []))
                _measured(row)
                if entry is not None and entry.arm(variant) is not None:
                    _published(row, entry)
                    _judged(row, entry, {k[:2]: v for k, v in ran.items() if k[2] == scale}, ran)
                elif row.records:
                    row.verdict = "not in catalog"
                    row.why = ("no published figures" if entry is None else
                               f"{exp} has no arm {variant} now (the records are older than the catalog)")
                _left_out(row)
                rows.append(row)
    by_key = {row.key: row for row in rows}
    for row in rows:
        _noisy(row, by_key, strict)
        _fault_bursts(row)
        base = by_key.get(row.base_key) if row.base_key else None
        row.cause = explain.cause(row, base) if base is not None else ""
    return rows


def _add(row: Row, note: str) -> None:
    """`note` after the row's reasons (nothing when empty)."""
    row.why = f"{row.why}; {note}" if row.why and note else note or row.why


def _fault_bursts(row: Row) -> None:
    """Timed blocks with a page-fault burst (train/host_noise.py fault_bursts) are named beside the verdict: they
    stay in the ratio (a burst slows the block it lands in by up to about 1 %), but a reader sees them."""
    bursts = sum(len(r["metrics"].get("fault_burst_blocks") or ()) for r in row.records)
    if bursts:
        _add(row, f"{bursts} timed block(s) with a page-fault burst (metrics.fault_burst_blocks)")


def _noisy(row: Row, by_key: dict[tuple[str, str, str], Row], strict: bool) -> None:
    """A verdict resting on repeats from a noisy machine says so; under --strict it is no verdict at all."""
    base = by_key.get(row.base_key) if row.base_key else None
    count = row.noisy_repeats + (base.noisy_repeats if base is not None else 0)
    if not count or row.verdict not in intervals.CONCLUSIVE:
        return
    reasons = "; ".join(r for r in {row.noisy_reasons, base.noisy_reasons if base else ""} if r)
    note = f"{count} repeat(s) of this arm and its baseline ran on a noisy machine ({reasons or 'see records'})"
    if strict:
        row.verdict, row.why = (intervals.INCONCLUSIVE,
                                f"--strict: {note}; rerun on a quiet machine (accel doctor --bench)")
    else:
        _add(row, note)


def _left_out(row: Row) -> None:
    """Interrupted repeats are shown, never measured: the arm's verdict, or a note beside its ratio."""
    if not row.interrupted:
        return
    if not row.records:
        row.verdict, row.why = INTERRUPTED, f"{INTERRUPTED}: {row.interrupted[-1]}"
    else:
        _add(row, f"{len(row.interrupted)} interrupted repeat(s) not counted")


def _measured(row: Row) -> None:
    recs = row.records
    row.n = len(recs)
    metric = lambda name: intervals.stat(r["metrics"].get(name) for r in recs)  # noqa: E731
    throughput, accuracy = metric("throughput_samples_per_s"), metric("test_accuracy_pct")
    row.throughput_mean, row.throughput_sd = throughput.mean, throughput.sd
    row.accuracy_mean, row.accuracy_sd = accuracy.mean, accuracy.sd
    row.train_s_mean, row.step_ms_median = metric("train_s").mean, metric("step_time_ms_median").mean
    noisy = [r["machine"] for r in recs if (r.get("machine") or {}).get("noisy")]
    row.noisy_repeats = len(noisy)
    reasons = sorted({str(reason) for m in noisy for reason in m.get("noisy_reasons") or []})
    row.noisy_reasons = "; ".join(reasons[:2]) + (f"; {len(reasons) - 2} more" if len(reasons) > 2 else "")
    joules = [r["energy"].get("joules_per_sample") for r in recs if (r.get("energy") or {}).get("measured")]
    joules = [j for j in joules if j]
    row.energy_j_per_sample = sum(joules) / len(joules) if joules else None
    unread = {r["energy"].get("reason") for r in recs if r.get("energy") and not r["energy"].get("measured")}
    row.energy_note = "" if joules or not unread else sorted(unread)[0]
    if recs:
        row.data_source = "/".join(sorted({str(r["config"].get("data_source")) for r in recs}))
        seen = {end_to_end.samples_seen(r) for r in recs}
        row.samples_seen = seen.pop() if len(seen) == 1 else None


def _published(row: Row, entry: experiments.Experiment) -> None:
    """What the source published for the arm: times, accuracy, the ratio on the same work with its basis and
    band, and its counts and settings against the records (stats/bases/counts.py)."""
    times = pairing.published_times(entry, row.variant)
    row.published_time = ", ".join(text for text, _ in times) or "-"
    row.published_time_s = times[0][1] if times else None
    row.published_accuracy = pairing.published(entry, "test_accuracy_pct", row.variant)
    accuracy = pairing.published_figure(entry, "test_accuracy_pct", row.variant)
    row.accuracy_context = accuracy.note if accuracy is not None and accuracy.basis == "context" else ""
    fig = pairing.ratio_figure(entry, row.variant)
    if fig is not None:
        row.published_ratio, row.published_basis = fig.same_work_value, pairing.basis_text(fig)
        row.band_low, row.band_high = fig.band()
        row.band_rule = fig.rule_text()
    row.outcomes.update(bases.arm_outcomes(entry, row.variant, row.records))


def _judged(row: Row, entry: experiments.Experiment, here, ran) -> None:
    """The comparison with the baseline arm (stats/judging.py), or why there is none."""
    if not row.records:
        row.why = (f"error: {row.errors[-1]}" if row.errors else
                   f"planned: {entry.planned_reason}" if entry.status == "planned" else "no records")
        return
    published = None if row.published_ratio is None else judging.Target(
        row.published_ratio, intervals.Interval(row.band_low, row.band_high), row.band_rule,
        pairing.told(entry, row.variant))
    done = judging.compare(entry, row.variant, row.scale, row.records, here, ran, published)
    row.verdict, row.why, row.baseline, row.base_key, row.pairing, row.ratio, row.processes, row.judged = (
        done.verdict, done.why, done.baseline, done.base_key, done.pairing, done.ratio, done.processes, done.judged)
    row.ci_low, row.ci_high = _bounds(done.interval)
    row.e2e_ratio, (row.e2e_ci_low, row.e2e_ci_high) = done.e2e_ratio, _bounds(done.e2e_interval)
    row.outcomes.update(done.outcomes)


def _bounds(interval: intervals.Interval | None) -> tuple[float | None, float | None]:
    return (None, None) if interval is None else (interval.low, interval.high)


def accuracy_delta(row: Row, by_key: dict[tuple[str, str, str], Row]) -> tuple[float | None, str]:
    """(accuracy - the baseline arm's, in points, or None, why not). Arms compare only when they saw
    the same number of training samples: at bench scale a bigger batch sees more, and learns more."""
    if row.accuracy_mean is None:
        return None, "-"
    if row.base_key is None:
        return (0.0, "reference arm") if row.verdict == "baseline" else (None, "no baseline arm ran")
    base = by_key.get(row.base_key)
    if base is None or base.accuracy_mean is None:
        return None, "baseline arm has no accuracy"
    if None in (row.samples_seen, base.samples_seen) or row.samples_seen != base.samples_seen:
        return None, f"not compared: {row.samples_seen or '-'} vs {base.samples_seen or '-'} samples seen"
    return row.accuracy_mean - base.accuracy_mean, "same samples seen"


def book_accuracy(row: Row) -> bool:
    """Published accuracy is compared only with a book-scale run on the real data set."""
    return row.scale == "book" and bool(row.records) and all(
        r["config"].get("data_source") == "real" for r in row.records)


def arm_halfwidths(records: list[dict[str, Any]], ids: list[str]) -> dict[str, float | None]:
    """"id [arm]" -> relative 95 % half-width of the arm's ratio (its baseline measured among `records`),
    else of its own throughput; None where no interval exists yet (one repeat, or no per-step times). A
    baseline with no ratio of its own is left out: a comparison is precise when its ratios are, and a
    baseline's own throughput carries the process-to-process spread the pairing removes (an arm that is
    also another arm's baseline, as in chapter 4's chain, keeps its own ratio's half-width).
    What `--rounds auto` (accel run, launch and compare) stops on (core/stats/stopping.py)."""
    out: dict[str, float | None] = {}
    built = build(Loaded(records, [], 1), ids)
    compared = {row.base_key for row in built if row.ratio is not None and row.base_key}
    for row in built:
        if row.experiment not in ids or not row.n:
            continue
        if row.key in compared and row.ratio is None:  # a baseline: its precision is its arms' ratios'
            continue
        key = str(Arm.of(row))
        if row.ratio is not None and row.interval is not None:
            out[key] = _relative(row.interval, row.ratio)
            continue
        repeats = [rep for rep in map(intervals.repeat_of, row.records) if rep is not None]
        if len(repeats) < 2 or len(repeats) != len(row.records):
            out[key] = None
            continue
        out[key] = _relative(intervals.throughput_interval(repeats), intervals.throughput(repeats))
    return out


def _relative(interval: intervals.Interval, value: float) -> float | None:
    return (interval.high - interval.low) / 2 / value if value > 0 else None
