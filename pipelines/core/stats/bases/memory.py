"""Memory saving: the memory an arm saves against its baseline, as a factor (baseline peak / the arm's: 2 = half the
memory), its interval, and its verdict where the source published a factor (or stated one as a rule of thumb),
on the same effect rule as a speed-up (config/effect.py): a factor above the band saves more than published.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from pipelines.core.config import experiments
from pipelines.core.config.arm import Arm
from pipelines.core.stats import intervals, pairing, plain_table, record_pairing
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


def pair_outcome(entry: experiments.Experiment, variant: str, records: Records, base_records: Records) -> Saving | None:
    """The basis's result for an arm against its baseline (stats/bases/__init__.py): its saving, if both measured."""
    return saving(entry, variant, records, base_records) if base_records else None


FIELDS = {"memory_metric": "-", "memory_ratio": None, "memory_ci_low": None, "memory_ci_high": None,
          "published_memory_ratio": None, "memory_verdict": "-", "memory_why": ""}


def fields(found: Saving) -> dict[str, Any]:
    low, high = (None, None) if found.interval is None else (found.interval.low, found.interval.high)
    return {"memory_metric": found.metric, "memory_ratio": found.ratio, "memory_ci_low": low, "memory_ci_high": high,
            "published_memory_ratio": found.published, "memory_verdict": found.verdict, "memory_why": found.why}


def _measured(rows: Sequence[Any]) -> list[tuple[Any, Saving]]:
    return [(row, row.outcomes[NAME]) for row in rows if NAME in row.outcomes]


def _interval(found: Saving) -> str:
    return "no interval" if found.interval is None else found.interval.text()


def section(rows: Sequence[Any]) -> str:
    """A run's memory lines: each saving factor with its interval, the published factor and the verdict."""
    measured = _measured(rows)
    if not measured:
        return ""
    table = [[str(Arm.of(row)), found.metric, f"{intervals.fmt(found.ratio)}"
              + (f" [{intervals.fmt(found.interval.low)}, {intervals.fmt(found.interval.high)}]" if found.interval
                 else ""), intervals.fmt(found.published), found.verdict] for row, found in measured]
    reasons = "".join(f"\n  {Arm.of(row)}: {found.why}" for row, found in measured if found.why)
    return "\nmemory (saving factor = baseline peak / arm peak):\n" + plain_table.render(
        ["arm", "memory", "measured [95 %]", "published", "verdict"], table) + reasons


REPORT = ("Memory", "Saving factor = the baseline arm's peak / this arm's (2 = half the memory), with a 95 % "
          "bootstrap interval over repeats. Peak: what autograd keeps for backward where the technique trades "
          "exactly that (activation checkpointing), else the training's peak (CUDA allocator; on a CPU the "
          "process's resident-set high-water mark, which includes torch itself and so dilutes any saving).")


def report_rows(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"experiment": row.experiment, "variant": row.variant, "scale": row.scale, "n": row.n,
             "memory measured": found.metric, "compared with": row.baseline,
             "saving factor": intervals.fmt(found.ratio), "95 % interval": _interval(found),
             "published": intervals.fmt(found.published), "verdict": found.verdict} for row, found in _measured(rows)]
