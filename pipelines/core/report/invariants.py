"""The gate for a machine class without a reference of its own: what holds on every class.

Ratios drift between machine classes (a Zen 5 with AVX-512 bf16 and a Zen 3 without it judge bf16
differently), so the drift gate (report/drift.py) compares a run only with a reference of its own class.
Hosted CI runners change CPU models often, and a class seen for the first time would then be checked for
nothing but errors. What does hold across classes is an arm's *direction* against its baseline where every
committed reference agrees on it: pruning 80 % of the weights faster than none, two intra-op threads faster
than one. An *invariant* is such an arm: its
95 % interval lies entirely above 1 (faster than its baseline) in every committed reference that measured
it, or entirely below 1 in every one. A run whose interval lies entirely on the other side of 1 breaks
it; a run that cannot tell (its interval holds 1) breaks nothing. The references used are named.

`python -m pipelines.core.report.invariants RUN REF...` prints the invariants it checked and exits 1 when
one is broken (ci/reference-timings.sh runs it when no reference of this class is committed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pipelines.core.config.arm import Arm
from pipelines.core.errors import ConfigError
from pipelines.core.record.results import load
from pipelines.core.stats import intervals, rows as stats_rows
from pipelines.core.stats.rows import Row


@dataclass(frozen=True)
class Invariant:
    arm: Arm
    scale: str
    faster: bool  # True: faster than its baseline (interval above 1) in every reference; False: slower
    references: tuple[str, ...]

    def text(self) -> str:
        way = "faster" if self.faster else "slower"
        return f"{self.arm} {way} than its baseline ({len(self.references)} references)"


def direction(row: Row) -> bool | None:
    """True: the interval lies entirely above 1; False: entirely below; None: no interval, or it holds 1."""
    if row.ci_low is None or row.ci_high is None or row.verdict in ("baseline", "not run"):
        return None
    return True if row.ci_low > 1 else False if row.ci_high < 1 else None


def invariants(references: Sequence[Path], only: list[str] | None = None) -> list[Invariant]:
    """The arms whose direction every reference measured, conclusively and alike."""
    seen: dict[tuple[str, str, str], list[tuple[str, bool | None]]] = {}
    for reference in references:
        for row in stats_rows.build(load(reference), only):
            if row.verdict not in ("baseline", "not run"):
                seen.setdefault(row.key, []).append((str(reference), direction(row)))
    out = []
    for (experiment, variant, scale), found in sorted(seen.items()):
        directions = {d for _, d in found}
        if len(found) == len(references) and len(directions) == 1 and None not in directions:
            out.append(Invariant(Arm(experiment, variant), scale, directions.pop(), tuple(r for r, _ in found)))
    return out


def broken(rows: Sequence[Row], checked: Sequence[Invariant]) -> list[str]:
    """One line per invariant this run's rows break: a conclusive direction opposite to every reference's."""
    by_key = {row.key: row for row in rows}
    out = []
    for invariant in checked:
        row = by_key.get((invariant.arm.experiment, invariant.arm.variant, invariant.scale))
        if row is not None and direction(row) is (not invariant.faster):
            interval = intervals.Interval(row.ci_low, row.ci_high).text()
            out.append(f"{invariant.arm}: {intervals.fmt(row.ratio)} {interval} here, "
                       f"{'faster' if invariant.faster else 'slower'} than its baseline in "
                       + ", ".join(invariant.references))
    return out


def main(argv: list[str] | None = None) -> int:
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m pipelines.core.report.invariants RUN REFERENCE...", file=sys.stderr)
        return 2
    run, references = Path(args[0]), [Path(a) for a in args[1:]]
    try:
        checked = invariants(references)
        rows = stats_rows.build(load(run))
    except ConfigError as error:  # a folder that is not there or holds no records: one line, as accel says it
        print(f"invariants: error: {error}", file=sys.stderr)
        return 2
    measured = {row.key for row in rows if row.ci_low is not None}  # an interval: its direction is judged
    print(f"invariants: {len(checked)} arm(s) whose direction every reference agrees on "
          f"({', '.join(map(str, references))}):")
    for invariant in checked:
        here = "checked" if (invariant.arm.experiment, invariant.arm.variant, invariant.scale) in measured \
            else "not measured in this run"
        print(f"  {invariant.text()}: {here}")
    failures = broken(rows, checked)
    for line in failures:
        print(f"invariants: BROKEN {line}")
    if not failures:
        print("invariants: none broken")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
