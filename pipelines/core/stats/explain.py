"""Why a measured ratio is what it is: the "why" clause a verdict line ends with.

Two models, each tested against a number it never saw: this machine's (stats/prediction.py: the arm's and
its baseline's step profiles priced on the process's machine card, beside the measured ratio) and the
source's (stats/source_machine.py: the source's machine fitted on another of its published tables, beside the
published ratio). The source's is said only for a faster or slower verdict, the gap it explains.
"""

from __future__ import annotations

from typing import Any

from pipelines.core.stats import intervals, prediction, source_machine


def note(row: Any, base: Any) -> str:
    """The clause for `row` (a stats/rows.py Row with a measured ratio) against its baseline row; "" if none."""
    if row.ratio is None:
        return ""
    here = prediction.predict(row.records, base.records)
    parts = [f"on this machine's card and step profiles, {here.cause(row.ratio)}"] if here else []
    if row.verdict in (intervals.FASTER, intervals.SLOWER):
        parts.append(source_machine.note(row.experiment, row.variant, base.key[:2], row.published_ratio,
                                         (row.band_low, row.band_high),
                                         here.baseline.share("fixed") if here else None))
    return "; ".join(part for part in parts if part)
