"""End-to-end: an arm's whole repeats against its baseline's, warm-up and compilation included, over the same work
(`samples_seen`), and bench processes projected onto the source's work. What a source that timed its whole run,
compilation inside its first epoch, measured. Judged on the same effect rule and words as a same-work throughput
ratio (stats/bases/throughput.py), once the ratio is on the source's basis.
"""

from __future__ import annotations

import statistics
from typing import Any

from pipelines.core.config import experiments
from pipelines.core.stats import intervals, record_pairing
from pipelines.core.stats.bases.throughput import WORDS, band, band_text, judge, rule  # noqa: F401 (this basis's)

NAME = "end-to-end"
FIGURES = ("end-to-end",)
ORDER = 2

Records = list[dict[str, Any]]


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


def whole_repeats(records: Records, base_records: Records) -> tuple[float, intervals.Interval | None] | None:
    """(ratio, interval) of whole repeats (warm-up + timed steps): baseline time / the arm's, with an interval
    where both arms have two repeats or more. None where a repeat lacks its times or the arms saw different
    numbers of samples."""
    total = lambda r: (r["metrics"].get("warmup_s") or 0.0) + (r["metrics"].get("train_s") or 0.0)  # noqa: E731
    mine, theirs = [total(r) for r in records], [total(r) for r in base_records]
    if not all(mine) or not all(theirs) or {samples_seen(r) for r in records} != \
            {samples_seen(r) for r in base_records}:
        return None
    if len(mine) >= 2 and len(theirs) >= 2:
        return intervals.mean_ratio_interval(theirs, mine)
    return (sum(theirs) / len(theirs)) / (sum(mine) / len(mine)), None


def _one_time_and_steady(record: dict[str, Any]) -> tuple[float, float] | None:
    """(one-time seconds, steady seconds per sample) of one interleaved record: the warm-up's time beyond what
    its samples take at the steady pace (compilation, cold caches), plus the same excess of blocks in which
    dynamo compiled again (a last partial batch's new shape, which the source's run paid once too)."""
    metrics, cfg = record["metrics"], record["config"]
    blocks = record_pairing.blocks_of(record)
    steady = [b for b in blocks if not b[3] and b[4]]
    if not steady:
        return None
    pace = sum(b[2] for b in steady) / sum(b[4] for b in steady)
    warm = (metrics.get("warmup_s") or 0.0) - (metrics.get("warmup_steps") or 0) * (cfg.get("batch_size") or 0) * pace
    again = sum(b[2] - b[4] * pace for b in blocks if b[3])
    return max(0.0, warm) + max(0.0, again), pace


def projected(entry: experiments.Experiment, records: Records,
              base_records: Records) -> tuple[float, intervals.Interval, int, str] | None:
    """An end-to-end ratio on the source's work from bench processes that ran both arms: per process, each
    arm's one-time cost plus the source's samples at the arm's steady pace; (ratio, interval over processes,
    processes, how). None where the catalog does not say the source's work or no process ran both arms."""
    epochs, per_epoch = entry.settings.get("epochs"), entry.source_epoch_samples
    if not epochs or not per_epoch:
        return None
    work = epochs * per_epoch
    mine = {(r.get("pairing") or {}).get("process"): r for r in records}
    theirs = {(r.get("pairing") or {}).get("process"): r for r in base_records}
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
