"""Report rows: one per experiment arm and scale, measured beside published, each with its verdict.

The compared quantity is throughput (samples per second of training, data loading included), so a
ratio means what the book's ratio of training times means for the same work: baseline_time /
variant_time = variant_throughput / baseline_throughput, whatever the batch size. A verdict is
conclusive only when the ratio's bootstrap interval (stats/intervals.py) is; records without per-step times
(older schema) get the point ratio and the verdict "inconclusive" (no interval). An `interrupted` record
(a repeat stopped by Ctrl-C or SIGTERM) never enters a ratio: an arm with nothing else shows the verdict
"interrupted" and how far it got, an arm with finished repeats too says how many were left out.

Rows are flat dataclasses so that a table is `pandas.DataFrame(row.data() for row in rows)`: the CSV's
columns are these fields, in this order, and nothing else lists them.

Over 300 lines on purpose: every rule that turns records into a verdict (ratio, basis, memory, accuracy,
end to end) fills the same Row, and reading them together is how a verdict is checked.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipelines.core.record import results
from pipelines.core.config import experiments
from pipelines.core.stats import pairing, sensitivity
from pipelines.core.stats import intervals
from pipelines.core.errors import ConfigError
from pipelines.core.config.arm import Arm

HARNESS_ID = "harness-overhead"  # written by ci/harness-overhead.py; shown in its own section
HIDDEN = {"table": False}  # Row fields that are not table columns
NO_INTERVAL = "no interval: records without per-step times (older schema)"
INTERRUPTED = "interrupted"


@dataclass
class Loaded:
    records: list[dict[str, Any]]
    skipped: list[str]  # "file[:line]: reason" for everything that could not be used
    files: int


def load(results_dir: Path) -> Loaded:
    """Every valid record under results_dir (sub-folders too, except reference/ ones: those are compared
    with --against, never mixed in); damaged lines and unknown schemas are skipped, each with a reason."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ConfigError(f"results dir {root} does not exist; run an experiment first "
                          "(e.g. make <id> ARGS='--scale bench') or pass --results-dir")
    loaded = Loaded([], [], 0)
    for path in sorted(root.glob("**/*.jsonl")):
        if "reference" in path.relative_to(root).parts[:-1]:
            continue
        loaded.files += 1
        for item in results.read_tolerant(path):
            if isinstance(item, results.Skipped):
                loaded.skipped.append(item.reason)
            else:
                loaded.records.append(item)
    return loaded


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
    pairing: str = "-"  # how the interval paired this arm with its baseline (stats/pairing.py)
    verdict: str = "not run"
    why: str = ""
    judged: str = "-"  # which measured ratio the verdict judged: steady state, or end-to-end
    e2e_ratio: float | None = None  # the same arms' whole repeats, warm-up and compilation included
    e2e_ci_low: float | None = None
    e2e_ci_high: float | None = None
    memory_metric: str = "-"
    memory_ratio: float | None = None  # baseline peak / this arm's peak: 2 = half the memory
    memory_ci_low: float | None = None
    memory_ci_high: float | None = None
    published_memory_ratio: float | None = None
    memory_verdict: str = "-"
    data_source: str = "-"
    samples_seen: int | None = None
    accuracy_mean: float | None = None
    accuracy_sd: float | None = None
    published_accuracy: float | None = None
    accuracy_context: str = ""  # why the published accuracy is context only, never a delta (basis "context")
    # counts and settings (bases "count", "setting") the records carry: (metric, published, measured, verdict)
    checks: list[tuple[str, float, float, str]] = field(default_factory=list)
    entry: experiments.Experiment | None = field(default=None, metadata=HIDDEN)
    records: list[dict[str, Any]] = field(default_factory=list, metadata=HIDDEN)
    errors: list[str] = field(default_factory=list, metadata=HIDDEN)
    interrupted: list[str] = field(default_factory=list, metadata=HIDDEN)  # how far each stopped repeat got
    base_key: tuple[str, str, str] | None = field(default=None, metadata=HIDDEN)
    processes: int = field(default=0, metadata=HIDDEN)  # the fewest processes behind either side of the interval

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.metadata.get("table", True)]

    def data(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.columns()}

    @property
    def key(self) -> tuple[str, str, str]:
        return self.experiment, self.variant, self.scale

    @property
    def family(self) -> str:
        return self.experiment.split("-")[0]

    @property
    def interval(self) -> intervals.Interval | None:
        return None if self.ci_low is None else intervals.Interval(self.ci_low, self.ci_high)


def samples_seen(record: dict[str, Any]) -> int | None:
    """Training samples a run saw: steps x samples per step under a step budget (warm-up steps train
    too), epochs x training-set size when it ran whole epochs. Accuracies compare only at equal values."""
    cfg, metrics = record["config"], record["metrics"]
    if cfg.get("steps"):
        per_step = metrics.get("samples_per_step") or (cfg.get("batch_size") or 0) * int(
            (record.get("dist") or {}).get("world_size") or 1)
        return int(((metrics.get("warmup_steps") or 0) + (metrics.get("measured_steps") or 0)) * per_step)
    epochs, size = metrics.get("epochs_completed"), cfg.get("train_samples")
    return int(epochs * size) if epochs and size else None


def build(loaded: Loaded, only: list[str] | None = None, strict: bool = False) -> list[Row]:
    """Rows for every catalog arm that has records, plus 'not run' rows for the ids named in `only`.
    `strict`: no conclusive verdict from an arm or baseline with a repeat that ran on a noisy machine."""
    entries = experiments.all_experiments()
    ran: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    errors: dict[tuple[str, str], list[str]] = defaultdict(list)
    stopped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for rec in loaded.records:
        if rec["experiment"] == HARNESS_ID:
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
                    _checks(row, entry)
                    _verdict(row, entry, {k[:2]: v for k, v in ran.items() if k[2] == scale}, ran)
                elif row.records:
                    row.verdict = "not in catalog"
                    row.why = ("no published figures" if entry is None else
                               f"{exp} has no arm {variant} now (the records are older than the catalog)")
                _left_out(row)
                rows.append(row)
    for row in rows:
        _noisy(row, {(r.experiment, r.variant, r.scale): r for r in rows}, strict)
        _fault_bursts(row)
    return rows


def _fault_bursts(row: Row) -> None:
    """Timed blocks with a page-fault burst (train/loop.py fault_bursts) are named beside the verdict: they
    stay in the ratio (a burst slows the block it lands in by up to about 1 %), but a reader sees them."""
    bursts = sum(len(r["metrics"].get("fault_burst_blocks") or ()) for r in row.records)
    if bursts:
        note = f"{bursts} timed block(s) with a page-fault burst (metrics.fault_burst_blocks)"
        row.why = f"{row.why}; {note}" if row.why else note


CONCLUSIVE = (intervals.REPRODUCED, intervals.FASTER, intervals.SLOWER)


def _noisy(row: Row, by_key: dict[tuple[str, str, str], Row], strict: bool) -> None:
    """A verdict resting on repeats from a noisy machine says so; under --strict it is no verdict at all."""
    base = by_key.get(row.base_key) if row.base_key else None
    count = row.noisy_repeats + (base.noisy_repeats if base is not None else 0)
    if not count or row.verdict not in CONCLUSIVE:
        return
    reasons = "; ".join(r for r in {row.noisy_reasons, base.noisy_reasons if base else ""} if r)
    note = f"{count} repeat(s) of this arm and its baseline ran on a noisy machine ({reasons or 'see records'})"
    if strict:
        row.verdict, row.why = (intervals.INCONCLUSIVE,
                                f"--strict: {note}; rerun on a quiet machine (accel doctor --bench)")
    else:
        row.why = f"{row.why}; {note}" if row.why else note


def _left_out(row: Row) -> None:
    """Interrupted repeats are shown, never measured: the arm's verdict, or a note beside its ratio."""
    if not row.interrupted:
        return
    if not row.records:
        row.verdict, row.why = INTERRUPTED, f"{INTERRUPTED}: {row.interrupted[-1]}"
    else:
        note = f"{len(row.interrupted)} interrupted repeat(s) not counted"
        row.why = f"{row.why}; {note}" if row.why else note


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
        seen = {samples_seen(r) for r in recs}
        row.samples_seen = seen.pop() if len(seen) == 1 else None


def _published(row: Row, entry: experiments.Experiment) -> None:
    times = pairing.published_times(entry, row.variant)
    row.published_time = ", ".join(text for text, _ in times) or "-"
    row.published_time_s = times[0][1] if times else None
    row.published_accuracy = pairing.published(entry, "test_accuracy_pct", row.variant)
    accuracy = pairing.published_figure(entry, "test_accuracy_pct", row.variant)
    row.accuracy_context = accuracy.note if accuracy is not None and accuracy.basis == "context" else ""
    metric = "ratio" if pairing.published_figure(entry, "ratio", row.variant) else STATED_SPEED
    row.published_ratio = pairing.published(entry, metric, row.variant)
    fig = pairing.published_figure(entry, metric, row.variant)
    if fig is not None:
        row.published_basis = "stated rule of thumb" if metric == STATED_SPEED else \
            fig.basis_name if fig.work_ratio == 1.0 else (
            f"{fig.basis_name} {fig.value:g} over {fig.work_ratio:.3g}x the work: {fig.same_work_value:.2f} "
            "on the same work")
    if row.published_ratio is not None:
        row.band_low, row.band_high = fig.band(entry.tolerance)


MATCHES, DIFFERS = "matches", "differs"


def _checks(row: Row, entry: experiments.Experiment) -> None:
    """A published count or setting against what every record of the arm measured: 'matches' when all do
    (Published.matches: the figure's range or printed precision), else 'differs'. No interval: a count is
    exact, and one record that differs is a difference."""
    for fig in entry.published:
        # a count named for no arm is every arm's (a model's parameters do not change with its precision)
        if fig.basis_name not in ("count", "setting") or fig.variant not in (None, row.variant):
            continue
        values = [r["metrics"].get(fig.metric) for r in row.records]
        values = [v for v in values if isinstance(v, (int, float))]
        if values:
            verdict = MATCHES if all(fig.matches(v) for v in values) else DIFFERS
            row.checks.append((fig.metric, fig.value, values[0] if verdict == MATCHES else
                               next(v for v in values if not fig.matches(v)), verdict))


def _verdict(row: Row, entry: experiments.Experiment, here, ran) -> None:
    """The comparison with the baseline arm, or why there is none."""
    if not row.records:
        row.why = (f"error: {row.errors[-1]}" if row.errors else
                   f"planned: {entry.planned_reason}" if entry.status == "planned" else "no records")
        return
    base = pairing.baseline_arm(entry, row.variant, row.records, here)
    if base is None:
        row.verdict, row.why = "baseline", "the reference arm (ratio 1 by definition)"
        return
    row.base_key = (base[0], base[1], row.scale)
    row.baseline = str(Arm(base[0], base[1])) + (f" ({base[2]})" if base[2] else "")
    base_recs = ran.get(row.base_key, [])
    if not base_recs:
        row.verdict = "not comparable"
        row.why = f"baseline {Arm(base[0], base[1])} not run at {row.scale} scale"
        return
    difference = pairing.machine_difference(row.records + base_recs)
    if difference:
        row.verdict, row.why = "not comparable", f"no ratio: {difference}"
        return
    _ratio(row, base_recs)
    _end_to_end(row, base_recs)
    _memory(row, entry, base_recs)
    interval = row.interval
    row.judged = "steady state"
    figure = pairing.published_figure(entry, "ratio", row.variant)
    if figure is not None and figure.basis_name == "end-to-end" and pairing.hardware_class(entry) == \
            pairing.run_class(row.records):
        if row.scale != "book":
            # the source's compilation is spread over its whole run, a bench run's over a few steps: project
            # each process's compilation and steady steps onto the source's work, or say why not
            projected = projected_end_to_end(entry, row.records, base_recs)
            if projected is None:
                row.verdict = "not comparable"
                row.why = (f"end-to-end figure: judged at --scale book (here steady {intervals.fmt(row.ratio)}, "
                           f"end-to-end {intervals.fmt(row.e2e_ratio)})")
                return
            steady = intervals.fmt(row.ratio)
            row.judged = "end-to-end, projected"
            row.ratio, interval, row.processes, how = projected
            row.ci_low, row.ci_high = interval.low, interval.high
            row.why = f"{how}; steady state {steady}"
        else:
            row.judged = "end-to-end"
            interval = None if row.e2e_ci_low is None else intervals.Interval(row.e2e_ci_low, row.e2e_ci_high)
            row.ratio, row.ci_low, row.ci_high = row.e2e_ratio, row.e2e_ci_low, row.e2e_ci_high
    devices = pairing.device_count_difference(entry, row.variant, base[:2], row.records, base_recs)
    hardware = pairing.hardware_class(entry) not in ("any", pairing.run_class(row.records))
    if devices or hardware:
        row.verdict = "not comparable"
        stand_in = next((r["config"]["stand_in"] for r in row.records if r["config"].get("stand_in")), "")
        row.why = "; ".join(part for part in (devices, hardware and (
            f"different hardware class: published on {pairing.hardware_class(entry).upper()} "
            f"({entry.hardware or 'unstated'}), run on {pairing.run_class(row.records).upper()}"),
            stand_in.split(": ", 1)[-1].split(";")[0]) if part)
    elif row.published_ratio is None:
        row.verdict = "measured"
        row.why = "nothing published to compare with" + ("" if interval else f"; {NO_INTERVAL}")
    elif interval is None:
        row.verdict, row.why = intervals.INCONCLUSIVE, f"{NO_INTERVAL}; the point ratio alone decides nothing"
    elif row.processes < intervals.MIN_REPEATS_FOR_VERDICT:
        row.verdict, row.why = intervals.INCONCLUSIVE, too_few_processes(row, base_recs)
    else:
        band = intervals.Interval(row.band_low, row.band_high)
        row.verdict = intervals.verdict(interval, row.published_ratio, entry.tolerance, band)
        notes = [f"interval {interval.text()} straddles the band {band.text()}"
                 if row.verdict == intervals.INCONCLUSIVE else "",
                 sensitivity.at_the_edge(interval, band),
                 "" if row.judged != "steady state" else
                 sensitivity.infirm(row.verdict, row.records, base_recs, row.published_ratio, entry.tolerance, band)]
        row.why = "; ".join(note for note in (*notes, row.why) if note)


def too_few_processes(row: Row, base_recs: list[dict[str, Any]]) -> str:
    """Why fewer than MIN_REPEATS_FOR_VERDICT processes decide nothing, and the command that gives more."""
    repeats = min(len(row.records), len(base_recs))
    within = (f"{repeats} repeats in {row.processes} process{'es' if row.processes != 1 else ''}"
              if repeats > row.processes else f"{row.processes} process{'es' if row.processes != 1 else ''}")
    base = (row.base_key or ("BASELINE",))[0]
    more = (f"accel compare {base} {row.experiment} --scale {row.scale} --rounds {intervals.MIN_REPEATS_FOR_VERDICT}"
            if repeats > row.processes else f"--repeats {intervals.MIN_REPEATS_FOR_VERDICT}, or accel compare --rounds")
    return (f"{within}: the interval cannot see process-to-process noise; a verdict needs "
            f"{intervals.MIN_REPEATS_FOR_VERDICT}+ processes ({more})")


def _ratio(row: Row, base_recs: list[dict[str, Any]]) -> None:
    """The ratio and its interval: paired (same process and block round, or same alternation round) when
    the records say how they were measured, else the unpaired bootstrap from per-step times, else the
    point ratio of mean throughputs."""
    paired = pairing.paired_units(row.records, base_recs)
    row.pairing = paired.text()
    if paired.kind:
        row.ratio, interval = intervals.paired_ratio_interval(paired.units)
        row.ci_low, row.ci_high, row.processes = interval.low, interval.high, paired.processes
        return
    row.processes = min(pairing.processes(row.records), pairing.processes(base_recs))
    mine = [intervals.repeat_of(r) for r in row.records]
    theirs = [intervals.repeat_of(r) for r in base_recs]
    if None not in mine and None not in theirs:
        row.ratio, interval = intervals.ratio_interval(mine, theirs)
        row.ci_low, row.ci_high = interval.low, interval.high
        return
    base_mean = intervals.stat(r["metrics"]["throughput_samples_per_s"] for r in base_recs).mean
    row.ratio = row.throughput_mean / base_mean


def _one_time_and_steady(record: dict[str, Any]) -> tuple[float, float] | None:
    """(one-time seconds, steady seconds per sample) of one interleaved record: the warm-up's time beyond what
    its samples take at the steady pace (compilation, cold caches), plus the same excess of blocks in which
    dynamo compiled again (a last partial batch's new shape, which the source's run paid once too)."""
    metrics, cfg = record["metrics"], record["config"]
    blocks = pairing.blocks_of(record)
    steady = [b for b in blocks if not b[3] and b[4]]
    if not steady:
        return None
    pace = sum(b[2] for b in steady) / sum(b[4] for b in steady)
    warm = (metrics.get("warmup_s") or 0.0) - (metrics.get("warmup_steps") or 0) * (cfg.get("batch_size") or 0) * pace
    again = sum(b[2] - b[4] * pace for b in blocks if b[3])
    return max(0.0, warm) + max(0.0, again), pace


def projected_end_to_end(entry: experiments.Experiment, records: list[dict[str, Any]],
                         base_recs: list[dict[str, Any]]) -> tuple[float, intervals.Interval, int, str] | None:
    """An end-to-end ratio on the source's work from bench processes that ran both arms: per process, each
    arm's one-time cost plus the source's samples at the arm's steady pace; (ratio, interval over processes,
    processes, how). None where the catalog does not say the source's work or no process ran both arms."""
    epochs, per_epoch = entry.settings.get("epochs"), entry.source_epoch_samples
    if not epochs or not per_epoch:
        return None
    work = epochs * per_epoch
    mine = {(r.get("pairing") or {}).get("process"): r for r in records}
    theirs = {(r.get("pairing") or {}).get("process"): r for r in base_recs}
    totals, compile_s = [], []
    for process in [p for p in mine if p and p in theirs]:
        arm, base = _one_time_and_steady(mine[process]), _one_time_and_steady(theirs[process])
        if arm is None or base is None:
            continue
        totals.append((base[0] + work * base[1], arm[0] + work * arm[1]))
        compile_s.append(arm[0])
    if not totals:
        return None
    ratio, interval = intervals.paired_mean_ratio_interval([b for b, _ in totals], [a for _, a in totals])
    how = (f"end-to-end projected to the source's {epochs} x {per_epoch:,} samples: one-time cost "
           f"{statistics.fmean(compile_s):.1f} s (compilation, recompiles) + steady steps, {len(totals)} processes")
    return ratio, interval, len(totals), how


def _end_to_end(row: Row, base_recs: list[dict[str, Any]]) -> None:
    """Ratio of whole repeats (warm-up + timed steps: compilation included) over the same work: what a source
    that timed its whole run, compilation inside its first epoch, measured."""
    total = lambda r: (r["metrics"].get("warmup_s") or 0.0) + (r["metrics"].get("train_s") or 0.0)  # noqa: E731
    mine, theirs = [total(r) for r in row.records], [total(r) for r in base_recs]
    if not all(mine) or not all(theirs) or {samples_seen(r) for r in row.records} != \
            {samples_seen(r) for r in base_recs}:
        return
    if len(mine) >= 2 and len(theirs) >= 2:
        row.e2e_ratio, interval = intervals.mean_ratio_interval(theirs, mine)
        row.e2e_ci_low, row.e2e_ci_high = interval.low, interval.high
    else:
        row.e2e_ratio = (sum(theirs) / len(theirs)) / (sum(mine) / len(mine))


# A source's stated factors (the scale note's recipe table: "2x speed, 2x memory"): judged like measured figures
# when an arm has no published ratio of its own, and labelled as rules of thumb.
STATED_SPEED, STATED_MEMORY = "stated_speed_factor_x", "stated_memory_factor_x"

# A saving factor above the band saves more memory than published (not "faster").
MEMORY_WORDS = {intervals.FASTER: "saves more than published", intervals.SLOWER: "saves less than published"}

# Which per-repeat memory a memory ratio compares: what autograd keeps for backward where the technique
# trades exactly that (activation checkpointing), else the training's peak (CUDA allocator, CPU peak RSS).
MEMORY_METRICS = ("saved_for_backward_mib", "variant_peak_mib")


def _memory(row: Row, entry: experiments.Experiment, base_recs: list[dict[str, Any]]) -> None:
    """The memory saving factor (baseline peak / this arm's), its interval, and a verdict when the source
    published one."""
    for name in MEMORY_METRICS:
        mine = [r["metrics"].get(name) for r in row.records]
        theirs = [r["metrics"].get(name) for r in base_recs]
        if all(isinstance(v, (int, float)) and v > 0 for v in (*mine, *theirs)):
            break
    else:
        return
    row.memory_metric = name
    if len(mine) >= 2 and len(theirs) >= 2:
        row.memory_ratio, interval = intervals.mean_ratio_interval(theirs, mine)
        row.memory_ci_low, row.memory_ci_high = interval.low, interval.high
    else:
        row.memory_ratio = (sum(theirs) / len(theirs)) / (sum(mine) / len(mine))
    figure = next((fig for metric in ("memory_ratio", STATED_MEMORY) if
                   (fig := pairing.published_figure(entry, metric, row.variant)) is not None), None)
    row.published_memory_ratio = figure and figure.same_work_value
    if figure is None:
        row.memory_verdict = "measured"
    elif row.memory_ci_low is None or min(pairing.processes(row.records), pairing.processes(base_recs)) < \
            intervals.MIN_REPEATS_FOR_VERDICT:
        row.memory_verdict = intervals.INCONCLUSIVE
    else:
        judged = intervals.verdict(intervals.Interval(row.memory_ci_low, row.memory_ci_high),
                                   row.published_memory_ratio, entry.tolerance,
                                   intervals.Interval(*figure.band(entry.tolerance)))
        row.memory_verdict = MEMORY_WORDS.get(judged, judged)


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
    if row.samples_seen is None or row.samples_seen != base.samples_seen:
        return None, f"not compared: {row.samples_seen or '?'} vs {base.samples_seen or '?'} samples seen"
    return row.accuracy_mean - base.accuracy_mean, "same samples seen"


def book_accuracy(row: Row) -> bool:
    """Published accuracy is compared only with a book-scale run on the real data set."""
    return row.scale == "book" and bool(row.records) and all(
        r["config"].get("data_source") == "real" for r in row.records)


def arm_halfwidths(records: list[dict[str, Any]], ids: list[str]) -> dict[str, float | None]:
    """"id [arm]" -> relative 95 % half-width of the arm's ratio (its baseline measured among `records`),
    else of its own throughput; None where no interval exists yet (one repeat, or no per-step times). An
    arm that is the baseline of a measured ratio is left out: a comparison is precise when its ratios are,
    and a baseline's own throughput carries the process-to-process spread the pairing removes.
    What `--repeats auto` and `accel compare --rounds auto` stop on (core/stats/stopping.py)."""
    out: dict[str, float | None] = {}
    built = build(Loaded(records, [], 1), ids)
    compared = {row.base_key for row in built if row.ratio is not None and row.base_key}
    for row in built:
        if row.experiment not in ids or not row.n:
            continue
        if row.key in compared:  # a baseline: its precision is its arms' ratios', not its own throughput's
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
