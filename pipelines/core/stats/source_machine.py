"""The ratio the source's own machine should have given, from a fit of another of its tables.

A step on the source's machine is a fixed part plus its FLOPs at a rate: t = fixed + flops / rate, fitted by least
squares on one published table's step times (a catalog module's SOURCE_MACHINES). An arm of another table is then
predicted from its FLOPs and samples a step alone, so the fit never sees the row it explains: each table's arms are
explained by another table's fit. stats/explain.py says whether the prediction is close enough to the published
ratio for a gap between the source and this machine to be the machine's; where it is not (an arm that removes no
counted FLOPs, predicted at about 1.00 against a published speed-up), the gap is the source's code, software or
measurement. The fit folds the source's software into its "machine": it cannot separate the two, and the line
says so.
pipelines/catalog/source_machines.py says which tables the book's CPU is fitted on, and docs/timing.md what each
predicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from pipelines.core.config import experiments
from pipelines.core.stats import pairing


@dataclass(frozen=True)
class Fit:
    machine: experiments.SourceMachine
    table: experiments.Table
    fixed_s: float  # a step's fixed part
    rate: float  # FLOP/s of the part that grows with the work

    def step_s(self, flops: float) -> float:
        return self.fixed_s + flops / self.rate

    def ratio(self, arm: experiments.Row, base: experiments.Row) -> float:
        """Predicted throughput ratio of two table rows."""
        return (arm.samples / self.step_s(arm.flops)) / (base.samples / self.step_s(base.flops))

    def errors(self, table: experiments.Table) -> list[float]:
        """predicted / published - 1 for each of `table`'s rows against its first (the baseline)."""
        times = [_published_step_s(row) for row in table.rows]
        base = table.rows[0]
        return [self.ratio(row, base) / ((row.samples / t) / (base.samples / times[0])) - 1
                for row, t in zip(table.rows[1:], times[1:])]


def _published_step_s(row: experiments.Row) -> float:
    entry = experiments.all_experiments()[row.experiment]
    return pairing.published(entry, "train_time_s", row.arm) / row.steps


@cache
def fit(machine: experiments.SourceMachine, table: experiments.Table) -> Fit:
    """Least squares of the table's published step times on its FLOPs a step: the fixed part and the rate."""
    flops = np.array([row.flops for row in table.rows])
    seconds = np.array([_published_step_s(row) for row in table.rows])
    slope, fixed = np.polyfit(flops, seconds, 1)
    return Fit(machine, table, float(fixed), float(1 / slope))


def _find(experiment: str, variant: str):
    for machine in experiments.source_machines():
        for table in machine.tables:
            for row in (*table.rows, *table.others):
                if (row.experiment, row.arm) == (experiment, variant):
                    return machine, table, row
    return None


def explain(experiment: str, variant: str, base: tuple[str, str]) -> tuple[Fit, Fit, float] | None:
    """(the fit used, the check of it, the predicted ratio of the arm to `base` on the source's machine); the
    fit is of another table than the arm's, and the check is that fit's error on the arm's table. None where
    no source machine holds both rows in one table."""
    arm, baseline = _find(experiment, variant), _find(*base)
    if arm is None or baseline is None or arm[1] is not baseline[1]:
        return None
    machine, table = arm[0], arm[1]
    others = [t for t in machine.tables if t is not table and len(t.rows) >= 2]
    if not others:
        return None
    used = fit(machine, others[0])
    return used, fit(machine, table), used.ratio(arm[2], baseline[2])


def clause(experiment: str, variant: str, base: tuple[str, str], published: float) -> str:
    """What the source's machine as fitted gives for the arm, in words: "at the source (the book's CPU fitted on
    Table 6.1: ...) the model gives 1.95 (published 1.95: +0 %), the fixed part 65 % of the baseline's step there";
    "" where no source machine is modelled (`explain` is None)."""
    found = explain(experiment, variant, base)
    if found is None:
        return ""
    used, _, predicted = found
    base_row = _find(*base)[2]
    fixed_share = used.fixed_s / used.step_s(base_row.flops)
    worst = max(abs(e) for e in used.errors(_find(experiment, variant)[1]))
    return (f"at the source ({used.machine.name} fitted on {used.table.label}: {1e3 * used.fixed_s:.1f} ms a step "
            f"fixed + {used.rate / 1e9:.0f} GFLOP/s, within {100 * worst:.0f} % of this table's other arms) the "
            f"model gives {predicted:.2f} (published {published:.2f}: {100 * (predicted / published - 1):+.0f} %), "
            f"the fixed part {100 * fixed_share:.0f} % of the baseline's step there")
