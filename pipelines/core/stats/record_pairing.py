"""How an arm's records pair with its baseline's, and the ratio with its interval that the pairing gives.

Records pair by process and cycle where both arms ran blocks in the same processes (train/interleave.py),
else by round (the record's `pairing` comparison and round, harness/rounds.py), else not at all: the
interval then resamples the arms as independent. `processes` counts what a verdict's gate counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pipelines.core.stats import intervals
from pipelines.core.stats.trimming import Cycles

Records = list[dict[str, Any]]


@dataclass
class Pairing:
    """How an arm's records pair with its baseline's: `kind` "process" (blocks of one process, paired by
    cycle, each pair with its place in the period of the process's order: stats/trimming.py), "round" (the
    arms' processes of one round) or "" (not paired: the arms were measured apart, and the interval
    resamples them as independent). `units`: what stats/intervals.py's t interval runs over."""

    kind: str = ""
    units: list[intervals.Unit] = field(default_factory=list)
    dropped: int = 0  # block pairs left out: a recompile inside either block
    processes: int = 0  # the fewest processes either arm's paired records came from (the verdict's gate)

    def text(self) -> str:
        if self.kind == "process":
            pairs = sum(len(u.logs) for u in self.units)
            dropped = f", {self.dropped} with a recompile left out" if self.dropped else ""
            return f"same process: {len(self.units)} processes, {pairs} block pairs{dropped}"
        if self.kind == "round":
            within = "" if self.processes >= len(self.units) else \
                f" in {self.processes} process{'es' if self.processes != 1 else ''}"
            return f"same round: {len(self.units)} rounds{within}"
        return "unpaired"


def _mark(record: dict[str, Any]) -> dict[str, Any]:
    return record.get("pairing") or {}


def processes(records: Records) -> int:
    """How many processes measured these records: repeats of one process share its state (where its threads
    landed, its allocator, the minute), most of a shared machine's noise, so the verdict counts processes, not
    records. A record without a process mark counts as a process of its own."""
    return len({_mark(r).get("process") or id(r) for r in records})


def blocks_of(record: dict[str, Any]) -> list[tuple[int, int, float, bool, float]]:
    """An interleaved record's blocks as (round, steps, seconds, recompiled, samples); samples count every
    rank's. Blocks written before the samples column count full batches."""
    metrics = record["metrics"]
    ranks = int((record.get("dist") or {}).get("world_size") or 1)
    out = []
    for block in metrics.get("blocks") or ():
        steps, seconds = int(block[1]), float(block[2])
        recompiled = bool(block[5]) if len(block) > 5 else False
        samples = block[6] * ranks if len(block) > 6 else steps * (metrics.get("samples_per_step") or 0)
        out.append((int(block[0]), steps, seconds, recompiled, float(samples)))
    return out


def _block_throughputs(record: dict[str, Any]) -> dict[int, tuple[float, bool]]:
    """Cycle -> (samples/s of the block, a recompile inside it)."""
    return {index: (samples / seconds, recompiled) for index, steps, seconds, recompiled, samples in blocks_of(record)
            if steps and seconds > 0 and samples}


def _by_process(records: Records) -> dict[str, dict[str, Any]]:
    return {_mark(r).get("process"): r for r in records if _mark(r).get("process")}


def total_log_ratios(records: Records, base_records: Records) -> list[float]:
    """Per process that ran both arms in blocks: log(arm's samples / seconds) - log(baseline's), each side
    summed over the cycles both ran without a recompile (the ratio of totals, untrimmed, unweighted by
    block: a second estimate beside the paired one, stats/sensitivity.py)."""
    mine, theirs = _by_process(records), _by_process(base_records)
    out = []
    for process in [p for p in mine if p in theirs and mine[p] is not theirs[p]]:
        a = {b[0]: b for b in blocks_of(mine[process]) if b[1] and b[2] > 0 and b[4] and not b[3]}
        b = {b[0]: b for b in blocks_of(theirs[process]) if b[1] and b[2] > 0 and b[4] and not b[3]}
        both = sorted(set(a) & set(b))
        if both:
            out.append(math.log(sum(a[k][4] for k in both) / sum(a[k][2] for k in both))
                       - math.log(sum(b[k][4] for k in both) / sum(b[k][2] for k in both)))
    return out


def _alone(record: dict[str, Any]) -> bool:
    return len(_mark(record).get("arms") or ()) == 1


def _by_round(records: Records) -> dict[tuple, list[dict[str, Any]]]:
    """(comparison, round) -> its records. A baseline can have two in a round: its process shared with other
    arms, and the solo process that pairs it with the arms that run alone (harness/sharing.py
    `solo_baselines`)."""
    out: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        key = (_mark(record).get("comparison"), _mark(record).get("round"))
        if None not in key:
            out.setdefault(key, []).append(record)
    return out


def _like(record: dict[str, Any], candidates: Records) -> dict[str, Any]:
    """The candidate measured as `record` was: alone in its process, or among other arms."""
    return next((c for c in reversed(candidates) if _alone(c) == _alone(record)), candidates[-1])


def paired_units(records: Records, base_records: Records) -> Pairing:
    """Pair an arm's records with its baseline's: by process and cycle where both ran blocks in the
    same processes, else by round (comparison and round), else not at all."""
    mine, theirs = _by_process(records), _by_process(base_records)
    shared = [p for p in mine if p in theirs and mine[p]["metrics"].get("blocks") and theirs[p]["metrics"].get("blocks")
              and mine[p] is not theirs[p]]
    if shared:
        units, dropped = [], 0
        for process in shared:
            a, b = _block_throughputs(mine[process]), _block_throughputs(theirs[process])
            per_period = int(mine[process]["metrics"].get("cycles_per_period") or 1)
            logs, places = [], []
            for index in sorted(set(a) & set(b)):
                if a[index][1] or b[index][1]:
                    dropped += 1
                    continue
                logs.append(math.log(a[index][0]) - math.log(b[index][0]))
                places.append(index % per_period)
            if logs:
                units.append(Cycles(logs, places))
        if units:
            return Pairing("process", units, dropped, len(units))
    mine_r, theirs_r = _by_round(records), _by_round(base_records)
    units, used = [], []
    for key, mine_here in mine_r.items():
        if key not in theirs_r:
            continue
        mine_one = mine_here[-1]
        theirs_one = _like(mine_one, [t for t in theirs_r[key] if t is not mine_one] or theirs_r[key])
        if mine_one is not theirs_one:
            variant, baseline = intervals.repeat_of(mine_one), intervals.repeat_of(theirs_one)
            if variant is not None and baseline is not None:
                units.append((variant, baseline))
                used.append((mine_one, theirs_one))
    if not units:
        return Pairing()
    return Pairing("round", units, processes=min(processes([m for m, _ in used]), processes([t for _, t in used])))


class Ratio(NamedTuple):
    value: float
    interval: intervals.Interval | None  # None: the point ratio of mean throughputs, no per-step times
    processes: int  # the fewest processes behind either side
    pairing: str  # Pairing.text(): how the interval paired the arms


def ratio(records: Records, base_records: Records) -> Ratio:
    """The arm's throughput ratio to its baseline: paired (same process and cycle, or same
    round) when the records say how they were measured, else the unpaired bootstrap from per-step times, else
    the point ratio of mean throughputs."""
    paired = paired_units(records, base_records)
    if paired.kind:
        value, interval = intervals.paired_ratio_interval(paired.units)
        return Ratio(value, interval, paired.processes, paired.text())
    fewest = min(processes(records), processes(base_records))
    mine = [intervals.repeat_of(r) for r in records]
    theirs = [intervals.repeat_of(r) for r in base_records]
    if None not in mine and None not in theirs:
        value, interval = intervals.ratio_interval(mine, theirs)
        return Ratio(value, interval, fewest, paired.text())
    mean = lambda recs: intervals.stat(r["metrics"].get("throughput_samples_per_s") for r in recs).mean  # noqa: E731
    return Ratio(mean(records) / mean(base_records), None, fewest, paired.text())
