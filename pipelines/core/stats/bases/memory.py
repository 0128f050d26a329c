"""Memory saving: the memory an arm saves against its baseline, as a factor (baseline peak / the arm's: 2 = half the
memory), its interval, and its verdict where the source published a factor (or stated one as a rule of thumb),
on the same effect rule as a speed-up (config/effect.py): a factor above the band saves more than published.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pipelines.core.config import experiments
from pipelines.core.stats import intervals, pairing, record_pairing
from pipelines.core.stats.bases.throughput import band, band_text, judge, rule  # noqa: F401 (this basis's)

NAME = "memory saving"
FIGURES = ("memory",)
ORDER = 3
# A saving factor above the band saves more memory than published (not "faster").
MEMORY_WORDS = {intervals.FASTER: "saves more than published", intervals.SLOWER: "saves less than published"}
WORDS = (intervals.REPRODUCED, *MEMORY_WORDS.values(), intervals.INCONCLUSIVE)

# Which per-repeat memory a memory ratio compares: what autograd keeps for backward where the technique
# trades exactly that (activation checkpointing), else the training's peak (CUDA allocator, CPU peak RSS).
MEMORY_METRICS = ("saved_for_backward_mib", "variant_peak_mib")

Records = list[dict[str, Any]]


class Saving(NamedTuple):
    metric: str  # which of MEMORY_METRICS
    ratio: float
    interval: intervals.Interval | None  # None with fewer than two repeats on either side
    published: float | None  # the published factor on the same work
    verdict: str
    why: str = ""  # the sentence of what was seen, for a judged factor


def saving(entry: experiments.Experiment, variant: str, records: Records, base_records: Records) -> Saving | None:
    """The arm's saving factor against its baseline, from the first of MEMORY_METRICS every repeat of both
    arms measured; None where none is."""
    for name in MEMORY_METRICS:
        mine = [r["metrics"].get(name) for r in records]
        theirs = [r["metrics"].get(name) for r in base_records]
        if all(isinstance(v, (int, float)) and v > 0 for v in (*mine, *theirs)):
            break
    else:
        return None
    interval = None
    if len(mine) >= 2 and len(theirs) >= 2:
        ratio, interval = intervals.mean_ratio_interval(theirs, mine)
    else:
        ratio = (sum(theirs) / len(theirs)) / (sum(mine) / len(mine))
    figure = next((fig for metric in ("memory_ratio", pairing.STATED_MEMORY) if
                   (fig := pairing.published_figure(entry, metric, variant)) is not None), None)
    published = figure and figure.same_work_value
    processes = min(record_pairing.processes(records), record_pairing.processes(base_records))
    if figure is None:
        return Saving(name, ratio, interval, published, "measured")
    if interval is None or processes < intervals.MIN_REPEATS_FOR_VERDICT:
        return Saving(name, ratio, interval, published, intervals.INCONCLUSIVE)
    verdict, why = judge(interval, ratio, published, band(figure), rule(figure), pairing.told(entry, variant, figure),
                         processes, gain="memory saving", loss="memory increase",
                         words=lambda word: MEMORY_WORDS.get(word, word), factor=True)
    return Saving(name, ratio, interval, published, verdict, why)
