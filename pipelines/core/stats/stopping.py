"""When repeats stop: a fixed count, or `auto` (precise enough, or the time budget spent).

`--rounds auto` (the default at bench scale) runs rounds (every slot's process once, in ABBA order,
stats/orders.py) until, after at least
`PRECISION_ROUNDS`, every arm's 95 % interval has a half-width of at most `halfwidth` (5 %) of its value, or
until one more round would overrun the time budget, or `MAX_AUTO_REPEATS` rounds ran.

Why the precision rule waits one round longer than a verdict needs: a run that stops because its interval
came out narrow stops when its spread came out small by chance, and with 3 rounds (2 degrees of freedom)
that chance is large. Simulated on per-round log ratios at 2-8 % process-to-process noise (budget at 6
rounds, 20,000 runs each; tests/unit/test_stopping.py), stopping at 3 rounds held the true ratio in
92.3-95.2 % of runs (70 % of those that stopped at round 3 when the noise was 5 %), stopping no earlier
than 4 in 93.4-95.1 %. A budget stop is no selection on the spread, so the budget may still stop at 3. The next round is
expected to take as long as the longest round since the first: the first carries a process's one-time
costs (torch.compile's compilation, cold caches; chapter 3's first round is 25 s, the next ones 4 s), so
it stands for the next round only while it is the only one. An arm's interval
is that of its ratio to its baseline when the baseline ran beside it, else that of its own throughput
(stats/rows.py arm_halfwidths, the report's interval). Fewer than `MIN_ROUNDS` rounds give no verdict
(stats/intervals.py); the budget is the user's limit and may stop a run before that (the report then says
the run is inconclusive), but never before the first round.

The rule counts what it stops in rounds. `--rounds auto` (core/harness/rounds.py, for `accel run`, `launch`
and `compare`) counts rounds of processes; `--repeats auto` at smoke and book scale (core/harness/execute.py)
counts repeats of every arm in this process, in ABBA order, and records which part of the rule stopped it in
every record's `stopping`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.core.stats import intervals
from pipelines.core.config.repeat_rule import (AUTO, DEFAULT_HALFWIDTH, MAX_AUTO_REPEATS, check_budget,
                                               check_halfwidth)

MIN_ROUNDS = intervals.MIN_REPEATS_FOR_VERDICT  # fewer give no verdict; the budget may stop a run here
PRECISION_ROUNDS = MIN_ROUNDS + 1  # the precision rule stops no earlier (module docstring)


def precise_enough(widths: dict[str, float | None], limit: float) -> bool:
    return bool(widths) and all(w is not None and w <= limit for w in widths.values())


def widths_text(widths: dict[str, float | None]) -> str:
    return ", ".join(f"{k} ±{v * 100:.1f} %" if v is not None else f"{k} no interval"
                     for k, v in widths.items()) or "no arm measured"


@dataclass
class AutoStop:
    """The `auto` rule's state over one run: `should_start` before a round, `after_round` when it ends."""

    budget_s: float
    halfwidth: float = DEFAULT_HALFWIDTH
    max_rounds: int = MAX_AUTO_REPEATS
    rounds: int = 0
    stopped_by: str = ""  # "precision" | "budget" | "max_repeats" (set when it stops)
    widths: dict[str, float | None] = field(default_factory=dict)
    first_round_s: float = 0.0
    longest_later_round_s: float = 0.0  # the longest after the first (0 until a second round ran)
    elapsed_s: float = 0.0  # at the last decision

    def __post_init__(self) -> None:
        check_budget(self.budget_s)
        check_halfwidth(self.halfwidth)

    def after_round(self, widths: dict[str, float | None], round_s: float) -> None:
        self.rounds += 1
        self.widths = widths
        if self.rounds == 1:
            self.first_round_s = round_s
        else:
            self.longest_later_round_s = max(self.longest_later_round_s, round_s)

    def next_round_s(self) -> float:
        """How long the next round is expected to take (see the module docstring)."""
        return self.longest_later_round_s if self.rounds > 1 else self.first_round_s

    def should_start(self, elapsed_s: float) -> bool:
        """Whether another round runs; when not, `stopped_by` says why."""
        self.elapsed_s = elapsed_s
        if self.rounds >= PRECISION_ROUNDS and precise_enough(self.widths, self.halfwidth):
            self.stopped_by = "precision"
        elif self.rounds >= self.max_rounds:
            self.stopped_by = "max_repeats"
        elif self.rounds and elapsed_s + self.next_round_s() > self.budget_s:
            self.stopped_by = "budget"
        return not self.stopped_by

    def as_record(self) -> dict[str, Any]:
        """What a record keeps: the rule, which part of it stopped the run, and the half-widths then."""
        kept = asdict(self)
        kept.pop("first_round_s")
        kept.pop("longest_later_round_s")
        return {"rule": AUTO, **kept, "elapsed_s": round(self.elapsed_s, 3)}
