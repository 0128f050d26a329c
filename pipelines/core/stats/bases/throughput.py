"""Same-work throughput (and time-to-result converted to the same work): the ratio of two arms' samples per second
in their steady state, judged on the published effect (config/effect.py): reproduced inside the band, faster or
slower than published wholly outside it, else inconclusive, and one sentence of what was seen."""

from __future__ import annotations

from typing import Any, Callable

from pipelines.core.config import effect
from pipelines.core.stats import intervals

NAME = "same-work throughput"
FIGURES = ("same-work throughput", "time-to-result")
ORDER = 1
WORDS = (intervals.REPRODUCED, intervals.FASTER, intervals.SLOWER, intervals.INCONCLUSIVE)
GAIN, LOSS = "speed-up", "slow-down"
# the figures a measured ratio is judged against (stats/pairing.py ratio_figure; stats/bases/memory.py for memory)
RATIOS = ("ratio", "stated_speed_factor_x", "memory_ratio", "stated_memory_factor_x")


def band(fig: Any) -> intervals.Interval:
    """The effect rule's band around the figure's same-work value, its own margin, or its stated range."""
    return intervals.Interval(*fig.band())


def rule(fig: Any) -> str:
    return fig.rule_text()


def judge(interval: intervals.Interval, ratio: float, published: float, edges: intervals.Interval, why_band: str,
          told: str, processes: int, machine: str = "", gain: str = GAIN, loss: str = LOSS,
          words: Callable[[str], str] = lambda word: word, factor: bool = False) -> tuple[str, str]:
    """(verdict, sentence) of a ratio's interval against a published ratio's band: the sentence says the band,
    the direction seen, the rounds that would decide an inconclusive one, and the machine's difference.
    `words` renames the verdict for a basis that speaks of something else than speed (memory: saves more)."""
    word = words(intervals.verdict(interval, edges))
    said = effect.sentence(word, ratio, interval.low, interval.high, published, edges, why_band, told, processes,
                           intervals.t_975, machine, gain, loss, factor)
    return word, said


def band_text(fig: Any) -> str:
    """The figure's band and why, for `accel show` and the report's notes; '' for a figure no ratio is judged
    against (a training time is shown, its ratio to the baseline's is the judged figure)."""
    if fig.metric not in RATIOS:
        return ""
    low, high = fig.band()
    return f"{fig.same_work_value:.3f}: [{low:.3f}, {high:.3f}], {rule(fig)}"
