"""Why a measured ratio is what it is: the "why" clause a verdict line ends with.

Two models, each tested against a number it never saw: this machine's (stats/prediction.py: the arm's and
its baseline's step profiles priced on the process's machine card, beside the measured ratio) and the
source's (stats/source_machine.py: the source's machine fitted on another of its published tables, beside the
published ratio). The source's is said only for a faster or slower verdict, the gap it explains.
"""

from __future__ import annotations

from typing import Any

from pipelines.core.stats import intervals, prediction, record_pairing, source_machine


def note(row: Any, base: Any) -> str:
    """The clause for `row` (a stats/rows.py Row with a measured ratio) against its baseline row; "" if none."""
    if row.ratio is None:
        return ""
    here = prediction.predict(row.records, base.records)
    parts = []
    if here is not None:  # a step's prediction is a steady-state one: an end-to-end verdict's steps are compared
        steady = row.ratio if row.judged == "steady state" else record_pairing.ratio(row.records, base.records).value
        against = "" if steady == row.ratio else f" (against the steady-state {steady:.2f})"
        parts.append(f"on this machine's card and step profiles{against}, {here.cause(steady)}")
    if row.verdict in (intervals.FASTER, intervals.SLOWER):
        parts.append(source_machine.note(row.experiment, row.variant, base.key[:2], row.published_ratio,
                                         (row.band_low, row.band_high),
                                         here.baseline.share("fixed") if here else None))
    return "; ".join(part for part in parts if part)
