"""The rule a ratio is judged by: a band on the published *effect*, and the one sentence that says what was seen.

A published ratio p claims an effect of size ln p. The band is symmetric in log space around p:

    margin = min(max(SHARE x |ln p|, ln(1 + FLOOR)), ln(1 + CAP)),   band = p x e^(+-margin)

In words: the measured effect is half to 1.5 times the published one, never narrower than +-5 % and never wider
than +-15 %. Why these three numbers:
- SHARE = 0.5: replication studies call an effect that came back at about half its size a failure to replicate
  (RP:P, SSRP; Simonsohn's "small telescopes"), so a reproduction must hold at least half of it.
- FLOOR = 5 %: what the harness detects at its defaults (5 % slow-downs found in 65 of 70 calibration runs,
  docs/timing.md), over ten times its A/A bias, and wider than the published times' integer-second rounding
  (148 s / 125 s is uncertain by about +-0.8 %). A published effect below it is judged as "no effect, +-5 %",
  and the sentence says that no effect also reproduces it.
- CAP = 15 %: large ratios keep the strictness they had (an 8-GPU 6.49x must land within x/1.15 of itself).
So no interval that holds 1.00 reproduces a published effect of 10 % or more (tests/unit/test_effect_rule.py
checks every figure of the catalog).

A figure may carry its own margin (`Published.margin`, a fraction: 0.25 is x/1.25) with the reason for it; a
stated range ("~2-3x") is its own band. The verdict is decided on the printed 95 % interval (a TOST at 2.5 % a
side: what the reader sees decides): inside the band "reproduced", wholly above or below it "faster" or "slower
than published", else "inconclusive".

This module knows numbers only (no torch, no records), so the catalog, the rows and the report share it.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

SHARE = 0.5  # the share of the published log effect a reproduction may miss by, either way
FLOOR = 0.05  # the narrowest margin: x/1.05
CAP = 0.15  # the widest margin: x/1.15
AA_BIAS = 0.003  # the A/A bias bound of the calibration runs: a ratio closer than this to an edge is never decided
MAX_ROUNDS = 50  # rounds beyond this are not a plan (config/repeat_rule.MAX_AUTO_REPEATS)


class Band(NamedTuple):
    low: float
    high: float


def margin(published: float, override: float | None = None) -> float:
    """The band's half-width in log terms: `override` (a fraction) where a figure states one, else the rule."""
    if override is not None:
        return math.log1p(override)
    return min(max(SHARE * abs(math.log(published)), math.log1p(FLOOR)), math.log1p(CAP))


def band(published: float, override: float | None = None) -> Band:
    """published x e^(+-margin)."""
    delta = margin(published, override)
    return Band(published * math.exp(-delta), published * math.exp(delta))


def rule_text(published: float, override: float | None = None, reason: str = "") -> str:
    """Which part of the rule set this figure's band, in words a reader of the source would use."""
    if override is not None:
        return f"within ×/÷{1 + override:.2f} of it ({reason})" if reason else f"within ×/÷{1 + override:.2f} of it"
    delta = margin(published)
    if delta <= math.log1p(FLOOR) + 1e-12:
        return (f"within ±{FLOOR * 100:.0f} %: the published effect ({effect_text(published)}) is below the "
                f"{FLOOR * 100:.0f} % margin, so no effect also reproduces it")
    if delta >= math.log1p(CAP) - 1e-12:
        return f"within ×/÷{1 + CAP:.2f} of it"
    return "half to 1.5 times the published effect"


def effect_text(ratio: float) -> str:
    """+18 % or -16 % below 2x; 6.49x above."""
    return f"{ratio:.2f}x" if ratio >= 2 else f"{(ratio - 1) * 100:+.0f} %" if abs(ratio - 1) >= 0.01 else \
        f"{(ratio - 1) * 100:+.1f} %"


def span_text(low: float, high: float, gain: str = "speed-up", loss: str = "slow-down", factor: bool = False) -> str:
    """What an interval of ratios means as an effect: 'a 1-3 % speed-up', 'a 5-9 % slow-down', 'between a 6 %
    slow-down and a 16 % speed-up', 'a 1.8-2.0x speed-up'; `factor`: always as factors ('a 1.25-1.40x memory
    saving', where a percentage of a saving factor would not be the share of memory saved)."""
    if factor:
        return f"a {low:.2f}-{high:.2f}x factor (1.00 = no {gain})"
    def pct(value: float) -> str:  # whole percents, tenths below 1 % ("a 0.1-4 % speed-up", not "0-4 %")
        share = abs(value - 1) * 100
        return f"{share:.1f}" if share < 0.95 else f"{share:.0f}"

    if pct(low) == pct(high) and (low > 1 or high < 1) and high < 2:
        return f"a {pct(low)} % {gain if low > 1 else loss}"

    def a(text: str) -> str:  # "an 8 %", "an 11 %", "an 18 %", "a 3 %"
        return f"an {text}" if text.startswith(("8", "11", "18")) else f"a {text}"

    if low > 1:
        if low >= 2:
            return f"a {low:.1f}-{high:.1f}x {gain}"
        return f"{a(pct(low))}-{pct(high)} % {gain}" if high < 2 else f"{a(pct(low))} % to {high:.1f}x {gain}"
    if high < 1:
        return f"{a(pct(high))}-{pct(low)} % {loss}"
    return f"between {a(pct(low))} % {loss} and {a(pct(high))} % {gain}"


def direction_text(published: float, low: float, high: float, gain: str = "speed-up",
                   loss: str = "slow-down") -> str:
    """Whether the published effect's direction is seen at all: the interval against 1.00."""
    wanted, other = (gain, loss) if published >= 1 else (loss, gain)
    if low > 1 or high < 1:
        seen_side = gain if low > 1 else loss
        if seen_side == wanted:
            return f"the {wanted} itself is seen (the interval lies {'above' if low > 1 else 'below'} 1.00)"
        return f"a {other} instead (the interval lies {'above' if low > 1 else 'below'} 1.00)"
    return f"no {wanted} seen (the interval contains 1.00)"


def rounds_text(point: float, low: float, high: float, edges: Band, units: int,
                t_975: "callable[[int], float]") -> str:
    """For an inconclusive interval: about how many units (processes, rounds) in all would decide it if the
    spread stays as this run's, or that none would (the ratio sits at an edge). The interval is taken as a t
    interval on the log scale over `units`: s = h x sqrt(n) / t(n - 1), h its log half-width; the distance d is
    from the point to the nearer band edge; n* is the smallest n with t(n - 1) x s / sqrt(n) <= d. At 2 degrees of
    freedom s is itself uncertain by about 2x, so this is an estimate."""
    if units < 2 or point <= 0:
        return ""
    log_point = math.log(point)
    half = max(math.log(high) - log_point, log_point - math.log(low))
    spread = half * math.sqrt(units) / t_975(units - 1)
    distance = min(abs(log_point - math.log(edges.low)), abs(math.log(edges.high) - log_point))
    if distance < AA_BIAS or spread <= 0:
        return (f"no number of rounds decides: the ratio sits {distance * 100:.1f} % from the band's edge, within "
                f"the harness's A/A bias (±{AA_BIAS * 100:.1f} %)")
    for n in range(units + 1, MAX_ROUNDS + 1):
        if t_975(n - 1) * spread / math.sqrt(n) <= distance:
            return f"about {n} rounds in all ({n - units} more) would decide it if the spread stays as this run's"
    return (f"no number of rounds decides: the ratio sits {distance * 100:.1f} % from the band's edge, and the "
            f"spread would need more than {MAX_ROUNDS} rounds")


def sentence(word: str, point: float, low: float, high: float, published: float, edges: Band, rule: str,
             source: str = "", units: int = 0, t_975=None, machine: str = "", gain: str = "speed-up",
             loss: str = "slow-down", factor: bool = False) -> str:
    """One sentence for a judged line: the verdict, what was measured and what effect that is, what was
    published, the band a reproduction needs and why, whether the direction is seen, and for an inconclusive
    line how many rounds would decide; the machine difference last, where the figure depends on it.

    `word`: the verdict; `source`: how the published figure reads in its source ("the book's 148 s -> 125 s");
    `rule`: rule_text's words for this band."""
    digits = 3 if "1.00" in (f"{low:.2f}", f"{high:.2f}") else 2  # so "lies above 1.00" shows in the numbers
    measured = (f"measured {point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}], "
                f"{span_text(low, high, gain, loss, factor)}")
    size = "" if factor else f" ({effect_text(published)})"
    told = f"{source} is {published:.3f}x{size}" if source else f"published {published:.3f}x{size}"
    parts = [f"{word}: {measured}", told]
    if word == "inconclusive":
        parts.append(f"the interval straddles the band [{edges.low:.3f}, {edges.high:.3f}] ({rule})")
        log_half = max(math.log(high / point), math.log(point / low)) if point > 0 else 0.0
        log_margin = math.log(edges.high / published)
        if log_half > log_margin:
            parts.append(f"the interval (±{math.expm1(log_half) * 100:.0f} %) is wider than the margin "
                         f"(±{math.expm1(log_margin) * 100:.0f} %)")
        if t_975 is not None:
            more = rounds_text(point, low, high, edges, units, t_975)
            if more:
                parts.append(more)
    else:
        parts.append(f"reproducing it needs the interval inside [{edges.low:.3f}, {edges.high:.3f}] ({rule})")
    parts.append(direction_text(published, low, high, gain, loss))
    if machine:
        parts.append(machine)
    return "; ".join(parts)


def holds_no_effect(edges: Sequence[float]) -> bool:
    """Whether a band holds 1.00 (no effect at all would reproduce its figure)."""
    return edges[0] <= 1.0 <= edges[1]
