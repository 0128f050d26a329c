"""Drift against a committed reference run (DESIGN section 10): this run's ratios beside the reference's,
both intervals and the difference, and whether any conclusive verdict reversed.

What fails: timings on shared machines drift by tens of percent, so a CI job that asserted ratios would fail
on noise. A conclusive verdict that becomes another conclusive verdict is not noise: a reversal (faster than
published <-> slower than published) and a reproduction lost or gained (reproduced <-> faster or slower than
published) each get their own word in the table's `changed` column and fail `--fail-on-reversal`; a
conclusive verdict that becomes inconclusive, and everything else, is a drift table to read. Ratios
are comparable only on one machine class (record/machine_class.py: CPU model, family/model, vector units,
logical CPU count, GPUs; not torch or the image, whose changes are what drift shows), so a reference from
another class is never shown beside this run: `against` refuses it
(OtherMachineClass), and `accel report --against` then writes the full report without a drift table,
saying in one line (on the terminal and in report.md) that the drift check was skipped and why, the two
classes side by side. With nothing compared nothing can reverse, so --fail-on-reversal passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from pipelines.core.record import machine_class
from pipelines.core.record.results import Loaded, load
from pipelines.core.stats import rows as stats_rows
from pipelines.core.stats import intervals
from pipelines.core.report import tables
from pipelines.core.errors import ConfigError
from pipelines.core.stats.rows import Row
from pipelines.core.config.arm import Arm

COLUMNS = ("experiment", "variant", "scale", "ratio", "ci_low", "ci_high", "ref_ratio", "ref_ci_low",
           "ref_ci_high", "difference", "verdict", "ref_verdict", "reversed", "changed")
REVERSED, LOST, GAINED = "REVERSED", "REPRODUCTION LOST", "REPRODUCTION GAINED"


def changed(verdict: str, ref_verdict: str) -> str:
    """Which gated change of conclusion a verdict made against its reference's, or ''."""
    if intervals.OPPOSITE.get(verdict) == ref_verdict:
        return REVERSED
    if ref_verdict == intervals.REPRODUCED and verdict in intervals.OPPOSITE:
        return LOST
    if verdict == intervals.REPRODUCED and ref_verdict in intervals.OPPOSITE:
        return GAINED
    return ""


@dataclass
class Drift:
    reference: Path
    loaded: Loaded  # the reference's records (its machines are described beside the table)
    data: pd.DataFrame  # COLUMNS, one line per arm with a ratio in this run or the reference
    # every gated change of conclusion (module docstring): "id [arm] (scale): <reference verdict> -> <this
    # verdict>", with "(reproduction lost)" or "(reproduction gained)" where it is not a reversal
    reversals: list[str]


def machine_classes(records: list[dict[str, Any]]) -> set[tuple]:
    return {machine_class.key(r["env"], software=False) for r in records if r["status"] == "ok"}


class OtherMachineClass(ConfigError):
    """The reference was measured on another machine class than this run. `reason` is the one line a
    report prints when it skips the drift check instead (the two classes side by side)."""

    def __init__(self, reference: Path, ours: set[tuple], refs: set[tuple]) -> None:
        theirs_text = "; ".join(sorted(map(machine_class.text, refs)))
        ours_text = "; ".join(sorted(map(machine_class.text, ours)))
        same = machine_class.CLASS_WORDS
        self.reason = (f"{reference} is from another machine class: reference {theirs_text} vs this run "
                       f"{ours_text}; ratios drift only against a reference with the same {same}")
        super().__init__(f"--against {reference} is from another machine class ({theirs_text}) than this run "
                         f"({ours_text}); ratios drift only against a reference with the same {same}")


def check_same_class(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], reference: Path) -> None:
    """ConfigError unless the reference has usable records (a wrong path: exit 2); OtherMachineClass
    unless every machine class of the reference is one this run has."""
    ours, refs = machine_classes(mine), machine_classes(theirs)
    if not refs:
        raise ConfigError(f"--against {reference} holds no usable records; pass a results folder such as "
                          "results/reference/<run>")
    if ours and not refs <= ours:
        raise OtherMachineClass(reference, ours, refs)


def reference_for_this_machine(candidates: list[Path]) -> Path | None:
    """The committed reference among `candidates` whose every record is of this machine's class: machines
    change between sessions and CI (Zen 3, Zen 5, Sapphire Rapids), and a drift check is live only against
    a reference of the same class; None when no candidate is."""
    here = machine_class.this_machine()
    for folder in candidates:
        if not Path(folder).is_dir():
            continue
        classes = machine_classes(load(folder).records)
        if classes == {here}:
            return Path(folder)
    return None


def main(argv: list[str] | None = None) -> int:
    """`python -m pipelines.core.report.drift pick DIR...`: the reference folder of this machine's class (for
    ci/reference-timings.sh), printed; nothing printed when none is."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "pick":
        print("usage: python -m pipelines.core.report.drift pick DIR...", file=sys.stderr)
        return 2
    chosen = reference_for_this_machine([Path(a) for a in args[1:]])
    if chosen is not None:
        print(chosen)
    return 0


def against(rows: list[Row], loaded: Loaded, reference: Path, only: list[str] | None = None) -> Drift:
    """Compare `rows` (this run) with the reference run in `reference`; refuse another machine class
    (OtherMachineClass, a ConfigError: the report turns it into a skipped drift check)."""
    ref_loaded = load(reference)
    check_same_class(loaded.records, ref_loaded.records, reference)
    ref_rows = {row.key: row for row in stats_rows.build(ref_loaded, only)}
    lines, reversals = [], []
    for row in rows:
        ref = ref_rows.get(row.key) or Row(row.experiment, row.variant, row.scale)
        if row.ratio is None and ref.ratio is None:
            continue
        change = changed(row.verdict, ref.verdict)
        difference = None if row.ratio is None or ref.ratio is None else row.ratio - ref.ratio
        lines.append(dict(zip(COLUMNS, (row.experiment, row.variant, row.scale, row.ratio, row.ci_low,
                                        row.ci_high, ref.ratio, ref.ci_low, ref.ci_high, difference,
                                        row.verdict, ref.verdict, change == REVERSED, change))))
        if change:
            kind = "" if change == REVERSED else f" ({change.lower()})"
            reversals.append(f"{Arm.of(row)} ({row.scale}): {ref.verdict} -> {row.verdict}{kind}")
    return Drift(Path(reference), ref_loaded, pd.DataFrame(lines, columns=list(COLUMNS)), reversals)


class Judged(NamedTuple):
    rows: list[Row]
    loaded: Loaded
    drift: Drift | None  # None without a reference, or when the drift check was skipped
    drift_skipped: str | None = None  # why --against was not compared (another machine class), one line


def judge(results_dir: Path, only: list[str] | None = None, reference: Path | None = None,
          strict: bool = False) -> Judged:
    """The rows and verdicts of a results folder, and the drift check against `reference`. A reference of
    another machine class gives no drift table, and `drift_skipped` says why (the two classes side by side)."""
    loaded = load(results_dir)
    rows = stats_rows.build(loaded, only, strict)
    drift, skipped = None, None
    if reference is not None:
        try:
            drift = against(rows, loaded, reference, only)
        except OtherMachineClass as other:
            skipped = other.reason
    return Judged(rows, loaded, drift, skipped)


def terminal_table(drift: Drift) -> str:
    """The drift table as plain text for a terminal or CI log, with the reversals (or their absence)."""
    head = f"drift against {drift.reference}:"
    if drift.data.empty:
        return f"{head} no arm has a ratio in both runs"
    body = view(drift.data).to_string(index=False)
    tail = ("changed: " + "; ".join(drift.reversals)) if drift.reversals else \
        "no conclusive verdict reversed, no reproduction lost or gained"
    return "\n".join([head, body, tail])


def view(data: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "experiment": data.experiment, "variant": data.variant, "scale": data.scale,
        "ratio": data.ratio.map(intervals.fmt),
        "95 % interval": tables.interval_text(data.ratio, data.ci_low, data.ci_high),
        "reference ratio": data.ref_ratio.map(intervals.fmt),
        "reference interval": tables.interval_text(data.ref_ratio, data.ref_ci_low, data.ref_ci_high),
        "difference": data.difference.map(lambda v: "-" if pd.isna(v) else f"{v:+.2f}"),
        "verdict": data.verdict, "reference verdict": data.ref_verdict,
        "changed": data.changed.fillna("")})


if __name__ == "__main__":
    raise SystemExit(main())
