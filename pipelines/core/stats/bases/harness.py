"""The harness-overhead check: the shared training loop against a hand-written loop on the same work
(ci/harness-overhead.py's records, experiment id `ID`). Not a published figure: a goal, at most GOAL_PCT % of
throughput, judged by the overhead's 95 % interval, never by its point value. The report's section on it is
report/tables.py `harness`; its records are kept out of the experiment rows (stats/rows.py) and the plots."""

from __future__ import annotations

from typing import Any, NamedTuple

from pipelines.core.stats import intervals

NAME = "harness overhead"
FIGURES = ()  # judged against a goal, not a published figure
ORDER = 6
ID = "harness-overhead"  # the experiment id ci/harness-overhead.py writes

GOAL_PCT = 2.0  # the shared loop may cost at most this much throughput against a hand-written one
FASTER_NOTE = "harness faster than the plain loop: within noise, no overhead measured"
GOAL_MET, OVER_GOAL, NOT_ASSESSED = "goal met", "over the goal", "not assessed"
WORDS = (GOAL_MET, OVER_GOAL, intervals.INCONCLUSIVE, NOT_ASSESSED)


class Overhead(NamedTuple):
    """The harness's overhead against the goal. `verdict` is one of GOAL_MET, OVER_GOAL, INCONCLUSIVE,
    NOT_ASSESSED; `note` says what a negative overhead means (empty otherwise); `text` is the whole
    reading in one phrase; `pct_interval` is the overhead's 95 % interval in percent, (low, high), or None."""

    pct: float
    pct_interval: tuple[float, float] | None
    verdict: str
    note: str
    text: str


def overhead(ratio: float, interval: intervals.Interval | None, repeats: int,
             goal_pct: float = GOAL_PCT) -> Overhead:
    """Overhead % = (1 - shared/hand) x 100, read against the goal by its interval, never by the point.

    The overhead's interval is the ratio's mapped through 1 - r, so its ends swap: the overhead's upper
    end comes from the ratio's lower one. The goal is met only when that upper end is within the goal;
    an interval entirely above the goal is over it; anything else is inconclusive, and so is an interval
    from fewer than MIN_REPEATS_FOR_VERDICT repeats per loop (a bootstrap over 1-2 whole repeats cannot
    see run-to-run noise). A negative point means the harness loop measured faster than the plain loop:
    the harness adds work, so that is noise, not a negative cost, and it is said so instead of "-11.5 %
    within the goal". Without an interval nothing is judged."""
    pct = (1 - ratio) * 100
    note = ""
    if pct < 0:
        # the whole interval says "faster", from enough repeats to see run-to-run noise
        below = interval is not None and interval.low > 1 and repeats >= intervals.MIN_REPEATS_FOR_VERDICT
        note = "harness faster than the plain loop at 95 %: no overhead measured" if below else FASTER_NOTE
    reading = f"{pct:+.1f} %" + (f" ({note})" if note else "")
    if interval is None:
        return Overhead(pct, None, NOT_ASSESSED, note,
                        f"{reading}; no interval: the {goal_pct:g} % goal is not assessed")
    low, high = (1 - interval.high) * 100, (1 - interval.low) * 100
    span = f"95 % interval [{low:+.1f}, {high:+.1f}] %"
    if repeats < intervals.MIN_REPEATS_FOR_VERDICT:
        verdict = intervals.INCONCLUSIVE
        why = (f"{repeats} repeat(s) per loop: the interval cannot see run-to-run noise, a verdict needs "
               f"{intervals.MIN_REPEATS_FOR_VERDICT}+")
    elif high <= goal_pct:
        verdict, why = GOAL_MET, f"its upper end is within the {goal_pct:g} % goal"
    elif low > goal_pct:
        verdict, why = OVER_GOAL, f"all of it is above the {goal_pct:g} % goal"
    else:
        verdict, why = intervals.INCONCLUSIVE, f"it straddles the {goal_pct:g} % goal"
    return Overhead(pct, (low, high), verdict, note, f"{reading}; {span}: {verdict}, {why}")


def band(fig: Any = None) -> tuple[float, float]:
    """The overhead, in percent, that meets the goal."""
    return float("-inf"), GOAL_PCT


def rule(fig: Any = None) -> str:
    return f"the overhead's 95 % interval ends within the {GOAL_PCT:g} % goal"


def ours(record: dict[str, Any]) -> bool:
    """Whether a record is this check's, not an experiment's."""
    return record.get("experiment") == ID


def band_text(fig: Any = None) -> str:
    return rule()
