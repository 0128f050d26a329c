"""How firm a verdict is: whether its interval ends within 0.5 % of a band edge, and whether a conclusive
verdict holds under the other estimates of the same ratio.

A verdict decided by a few tenths of a percent is decided by whatever moves an interval by that much: the
trimming rule, a published ratio's rounding, one block. So a verdict row says "at the edge" when an end of
its interval lies within `EDGE` of a band edge, and a conclusive verdict from blocks paired in processes
is judged again under two other estimates of the same ratio, from the same records: the untrimmed mean of
the block pairs' log ratios, and the ratio of totals (each arm's samples over its seconds in each process,
a t interval over processes). Where either gives another verdict, the row says which, with its ratio and
interval; the verdict itself stays the main estimate's (stats/intervals.py).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

import numpy as np

from pipelines.core.stats import intervals, record_pairing
from pipelines.core.stats.intervals import Interval

EDGE = 0.005  # relative distance of an interval end from a band edge that makes a verdict "at the edge"


def at_the_edge(interval: Interval, band: Interval) -> str:
    """'' or the note naming the interval end and the band edge within EDGE of each other."""
    for end in (interval.low, interval.high):
        for edge in (band.low, band.high):
            if edge and abs(end / edge - 1) <= EDGE:
                return f"at the edge: the interval's end {end:.3f} is within {EDGE:.1%} of the band's {edge:.3f}"
    return ""


def other_estimates(records: Sequence[dict[str, Any]], base_records: Sequence[dict[str, Any]]
                    ) -> dict[str, tuple[float, Interval]]:
    """The untrimmed and the ratio-of-totals estimates (ratio, interval) where the arms ran in blocks of
    shared processes; none otherwise (a round-paired or unpaired ratio is already a ratio of totals)."""
    paired = record_pairing.paired_units(list(records), list(base_records))
    if paired.kind != "process":
        return {}
    out = {"untrimmed": intervals.paired_ratio_interval(paired.units, trim=0.0)}
    logs = record_pairing.total_log_ratios(list(records), list(base_records))
    if len(logs) > 1:
        point = math.exp(statistics.fmean(logs))
        spread = intervals.paired_halfwidth(np.asarray(logs)) or 0.0
        out["ratio of totals"] = (point, Interval(point * math.exp(-spread), point * math.exp(spread)))
    return out


def infirm(verdict: str, records: Sequence[dict[str, Any]], base_records: Sequence[dict[str, Any]],
           band: Interval) -> str:
    """'' or the note naming each other estimate under which a conclusive verdict does not hold."""
    if verdict not in intervals.CONCLUSIVE:
        return ""
    notes = []
    for name, (ratio, interval) in other_estimates(records, base_records).items():
        other = intervals.verdict(interval, band)
        if other != verdict:
            notes.append(f"the {name} estimate {intervals.fmt(ratio)} {interval.text()} is {other}")
    return f"not firm: {'; '.join(notes)}" if notes else ""
