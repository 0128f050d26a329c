"""An arm judged against its baseline arm: which arm that is, whether their records compare at all, the ratio
the verdict judges (steady state; or end to end where the source timed its whole run, projected onto the
source's work at bench scale), the results of the bases judged against the baseline's records (a memory
saving: `outcomes`), and the verdict against the published ratio with the
reasons beside it.

A verdict is conclusive only when the ratio's interval (stats/intervals.py) is, over at least
`intervals.MIN_REPEATS_FOR_VERDICT` processes; records without per-step times (older schema) get the point
ratio and the verdict "inconclusive" (no interval).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from pipelines.core.config import experiments
from pipelines.core.config.arm import Arm
from pipelines.core.record import machine_class
from pipelines.core.stats import bases, intervals, pairing, record_pairing, sensitivity
from pipelines.core.stats.bases import end_to_end, throughput

NO_INTERVAL = "no interval: records without per-step times (older schema)"
NOT_COMPARABLE = "not comparable"

Records = list[dict[str, Any]]


class Target(NamedTuple):
    """What an arm's ratio is judged against: the published ratio on the same work, its band, why the band is
    where it is (config/effect.py rule_text) and how the source tells the figure ("the book's 148 s -> 125 s")."""

    ratio: float
    band: intervals.Interval
    rule: str
    told: str


@dataclass
class Comparison:
    """What judging an arm against its baseline sets on the arm's row (stats/rows.py `Row`, the same names;
    `interval` is the judged ratio's, `e2e_interval` the whole repeats')."""

    verdict: str
    why: str
    baseline: str = "-"  # "id [arm]" the arm is compared with, and why that arm
    base_key: tuple[str, str, str] | None = None
    pairing: str = "-"
    ratio: float | None = None
    interval: intervals.Interval | None = None
    processes: int = 0  # the fewest processes behind either side of the interval
    judged: str = "-"
    e2e_ratio: float | None = None
    e2e_interval: intervals.Interval | None = None
    outcomes: dict[str, Any] = field(default_factory=dict)  # bases.pair_outcomes, by basis NAME


def compare(entry: experiments.Experiment, variant: str, scale: str, records: Records,
            here: Mapping[tuple[str, str], Records], ran: Mapping[tuple[str, str, str], Records],
            published: Target | None) -> Comparison:
    """Judge an arm's records (at least one) against its baseline arm's at one scale. `here`: the ok records
    of this scale by (experiment, arm); `ran`: by (experiment, arm, scale). `published`: the published ratio
    on the same work, its band and how the source tells it (Target); None where nothing is published."""
    chosen = pairing.baseline_arm(entry, variant, records, here)
    if chosen is None:
        return Comparison("baseline", "the reference arm (ratio 1 by definition)")
    base, base_key = chosen[:2], (chosen[0], chosen[1], scale)
    baseline = str(Arm(*base)) + (f" ({chosen[2]})" if chosen[2] else "")
    base_records = ran.get(base_key, [])
    if not base_records:
        return Comparison(NOT_COMPARABLE, f"baseline {Arm(*base)} not run at {scale} scale", baseline, base_key)
    difference = machine_class.difference(records + base_records) or another_world(records + base_records)
    if difference:
        return Comparison(NOT_COMPARABLE, f"no ratio: {difference}", baseline, base_key)
    steady = record_pairing.ratio(records, base_records)
    e2e_ratio, e2e_interval = end_to_end.whole_repeats(records, base_records) or (None, None)
    done = Comparison("", "", baseline, base_key, pairing=steady.pairing, ratio=steady.value,
                      interval=steady.interval, processes=steady.processes, judged="steady state",
                      e2e_ratio=e2e_ratio, e2e_interval=e2e_interval,
                      outcomes=bases.pair_outcomes(entry, variant, records, base_records))
    figure = pairing.published_figure(entry, "ratio", variant)
    if figure is not None and bases.judges(figure, end_to_end) and pairing.hardware_class(entry) == \
            pairing.run_class(records):
        if scale != "book":
            # the source's compilation is spread over its whole run, a bench run's over a few steps: project
            # each process's compilation and steady steps onto the source's work, or say why not
            projected = end_to_end.projected(entry, records, base_records)
            if projected is None:
                done.verdict = NOT_COMPARABLE
                done.why = (f"end-to-end figure: judged at --scale book (here steady {intervals.fmt(done.ratio)}, "
                            f"end-to-end {intervals.fmt(done.e2e_ratio)})")
                return done
            done.judged = "end-to-end, projected"
            done.ratio, done.interval, done.processes, how = projected
            done.why = f"{how}; steady state {intervals.fmt(steady.value)}"
        else:
            done.judged = "end-to-end"
            done.ratio, done.interval = done.e2e_ratio, done.e2e_interval
    done.verdict, done.why = _verdict(entry, variant, scale, records, base, base_records, published, done)
    return done


def resumed_elsewhere(record: dict[str, Any]) -> tuple[int, int] | None:
    """(the checkpoint's world size, the record's) when the repeat resumed from a checkpoint of another world
    size (-o checkpoint_any_world): its steps ran at two world sizes, a ratio of neither; else None."""
    there = (record["metrics"].get("resumed_from") or {}).get("world_size")
    here = (record.get("dist") or {}).get("world_size")
    return (there, here) if there and here and there != here else None


def another_world(records: Records) -> str:
    """'' unless a repeat resumed from a checkpoint of another world size: why there is no ratio."""
    for r in records:
        if worlds := resumed_elsewhere(r):
            return (f"repeat {r['repeat']} of {Arm(r['experiment'], r['variant'])} resumed from a checkpoint of "
                    f"{worlds[0]} ranks on {worlds[1]} (checkpoint_any_world)")
    return ""


def _verdict(entry: experiments.Experiment, variant: str, scale: str, records: Records, base: tuple[str, str],
             base_records: Records, published: Target | None,
             done: Comparison) -> tuple[str, str]:
    """(verdict, why) of the judged ratio: not comparable on other devices or hardware than the source's,
    measured where nothing is published, else against the published band."""
    devices = pairing.device_count_difference(entry, variant, base, records, base_records)
    hardware = pairing.hardware_class(entry) not in ("any", pairing.run_class(records))
    precision = pairing.precision_difference(pairing.ratio_figure(entry, variant), base_records)
    if precision and not (devices or hardware):
        return NOT_COMPARABLE, precision
    if devices or hardware:
        stand_in = next((r["config"]["stand_in"] for r in records if r["config"].get("stand_in")), "")
        return NOT_COMPARABLE, "; ".join(part for part in (devices, hardware and (
            f"different hardware class: published on {pairing.hardware_class(entry).upper()} "
            f"({entry.hardware or 'unstated'}), run on {pairing.run_class(records).upper()}"),
            stand_in.split(": ", 1)[-1].split(";")[0]) if part)
    interval = done.interval
    if published is None:
        return "measured", "nothing published to compare with" + ("" if interval else f"; {NO_INTERVAL}")
    if interval is None:
        return intervals.INCONCLUSIVE, f"{NO_INTERVAL}; the point ratio alone decides nothing"
    if done.processes < intervals.MIN_REPEATS_FOR_VERDICT:
        point = (f"; the point {intervals.fmt(done.ratio)} is {done.ratio / published.ratio:.2f}x the published "
                 f"{intervals.figure(published.ratio)}") if done.ratio else ""
        return intervals.INCONCLUSIVE, too_few_processes(entry.id, scale, base[0], done.processes,
                                                         min(len(records), len(base_records))) + point
    verdict, said = throughput.judge(interval, done.ratio, published.ratio, published.band, published.rule,
                                     published.told, done.processes, machine_difference(entry, records))
    notes = [sensitivity.at_the_edge(interval, published.band),
             "" if done.judged != "steady state" else
             sensitivity.infirm(verdict, records, base_records, published.band)]
    return verdict, "; ".join(note for note in (said, *notes, done.why) if note)


def machine_difference(entry: experiments.Experiment, records: Records) -> str:
    """Where the source's machine differs from this run's in what a speed-up depends on, one clause: the cores
    of a CPU figure ("published on 16 physical cores, run on 2 logical CPUs"), the GPU model of a GPU one."""
    envs = [r.get("env") or {} for r in records]
    if pairing.hardware_class(entry) == "any":  # a rule of thumb for no machine
        return ""
    if any((r.get("config") or {}).get("device") == "cuda" for r in records):
        names = sorted({str(gpu.get("name") if isinstance(gpu, dict) else gpu)
                        for env in envs for gpu in env.get("gpus") or []})
        ran = "/".join(names) or "an unnamed GPU"
        return "" if not entry.hardware or ran in entry.hardware else f"published on {entry.hardware}, run on {ran}"
    cpus = sorted({int(env["logical_cpus"]) for env in envs if env.get("logical_cpus")})
    if not cpus:
        return ""
    here = "/".join(map(str, cpus))
    if entry.source_cores is not None:
        if cpus == [entry.source_cores]:
            return ""
        return f"published on {entry.source_cores} physical cores, run on {here} logical CPUs"
    return f"published on {entry.hardware or 'an unstated CPU'}, run on {here} logical CPUs"


def too_few_processes(experiment: str, scale: str, baseline: str, processes: int, repeats: int) -> str:
    """Why fewer than MIN_REPEATS_FOR_VERDICT processes decide nothing, and the command that gives more;
    `repeats`: the fewer repeats of the arm and its baseline."""
    within = (f"{repeats} repeats in {processes} process{'es' if processes != 1 else ''}"
              if repeats > processes else f"{processes} process{'es' if processes != 1 else ''}")
    along = f", which brings {baseline} along" if baseline != experiment else ""  # an arm of its own entry: runs too
    more = f"accel run {experiment} --scale {scale} --rounds {intervals.MIN_REPEATS_FOR_VERDICT}{along}" \
        if scale != "smoke" else "a bench or book scale run"
    return (f"{within}: the interval cannot see process-to-process noise; a verdict needs "
            f"{intervals.MIN_REPEATS_FOR_VERDICT}+ processes ({more})")
