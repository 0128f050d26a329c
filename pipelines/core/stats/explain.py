"""Why a measured ratio is what it is: an arm's "why" line (`Row.cause`), printed under its verdict.

Two models, each tested against a number it never saw: this machine's (stats/prediction.py: the arm's step
priced at the rates its baseline's profile ran each op at, beside the measured ratio) and the source's
(stats/source_machine.py: the source's machine fitted on another of its published tables, beside the published
ratio). For a faster or slower verdict the line also says whether the gap to the source is the machine's: that
is said only where this machine's model is within prediction.CAUSE_WITHIN of the measured ratio and the
source's within SOURCE_WITHIN of the published one; otherwise the line says what is not explained, and why.
"""

from __future__ import annotations

from typing import Any

from pipelines.core.stats import intervals, prediction, record_pairing, source_machine

SOURCE_WITHIN = 0.15  # |source's model / published - 1| at most this, or the gap is not called the machine's


def cause(row: Any, base: Any) -> str:
    """The line for `row` (a stats/rows.py Row with a measured ratio) against its baseline row; "" where there
    is nothing to say (no measured ratio; no profiles and no gap to a published figure)."""
    if row.ratio is None:
        return ""
    here = prediction.predict(row.records, base.records)
    gap = row.verdict in (intervals.FASTER, intervals.SLOWER)
    parts = []
    if here is not None:
        steady = steady_ratio(row, base)
        against = "" if steady == row.ratio else f" (against the steady-state {steady:.2f})"
        parts.append(f"on this machine's card and step profiles{against}, {here.cause(steady)}")
        explained_here = abs(here.error(steady)) <= prediction.CAUSE_WITHIN
    elif gap:
        parts.append("not explained here: these records carry no machine card and step profiles")
        explained_here = False
    if gap:
        parts.append(_gap(row, base, here, explained_here))
    return "; ".join(parts)


def steady_ratio(row: Any, base: Any) -> float:
    """The measured ratio a prediction is held against: a step's prediction is a steady-state one, so an
    end-to-end verdict's steps are compared, not its one-time costs."""
    return row.ratio if row.judged == "steady state" else record_pairing.ratio(row.records, base.records).value


def _gap(row: Any, base: Any, here: prediction.Prediction | None, explained_here: bool) -> str:
    """Whether the gap between the measured and the published ratio is the machine's."""
    found = source_machine.explain(row.experiment, row.variant, base.key[:2]) if row.published_ratio else None
    if found is None:
        return (f"the gap to the published {row.published_ratio:.2f} is not explained: the source's machine is not "
                "modelled for this experiment (no other table of it to fit)")
    used, predicted = found[0], found[2]
    error = predicted / row.published_ratio - 1
    there = source_machine.clause(row.experiment, row.variant, base.key[:2], row.published_ratio)
    if abs(error) > SOURCE_WITHIN:
        return (f"the gap is not explained by the machine: {there}, so it lies in the source's code, software or "
                "measurement, or in more than the model's two parts")
    if not explained_here:
        return f"{there}; no cause for the gap while this machine's model misses"
    here_share = f", {100 * here.baseline.share('fixed'):.0f} % here" if here is not None else ""
    return (f"the gap is the machine's: {there}{here_share}; the fit cannot separate the machine from "
            f"{used.machine.software}")
