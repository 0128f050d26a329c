"""How firm a verdict is (core/stats/sensitivity.py): an interval end within 0.5 % of a band edge is named, and
a conclusive verdict from blocks paired in processes is judged again under the untrimmed and the ratio-of-
totals estimates; where either disagrees, the row says so and the verdict stays the main estimate's."""

from __future__ import annotations

import pytest

from pipelines.core.config import effect
from pipelines.core.stats import intervals, record_pairing, sensitivity
from pipelines.core.stats.intervals import Interval
from pipelines.core.stats import rows as stats_rows
from pipelines.core.record.results import Loaded
from test_paired_intervals import interleaved


def test_an_interval_end_near_a_band_edge_is_named():
    band = Interval(*effect.band(148 / 125))  # the book's exact 1.184, not the rounded 1.18
    assert band.low == pytest.approx(1.088, abs=5e-4)
    note = sensitivity.at_the_edge(Interval(1.09, 1.20), band)
    assert note == "at the edge: the interval's end 1.090 is within 0.5% of the band's 1.088"
    assert sensitivity.at_the_edge(Interval(1.10, 1.20), band) == ""


def arms(outliers: tuple[float, float, float]) -> tuple[list[dict], list[dict]]:
    """3 shared processes, 10 block pairs each at an arm/baseline ratio of 1.20; in process p one arm block is
    `outliers[p]` times slower (the host took a core), which a trimmed mean drops and a total keeps."""
    base, arm = [], []
    for p, outlier in enumerate(outliers):
        seconds = [1 / 1.2 * (1 + 0.002 * k) for k in range(10)]
        seconds[3] *= outlier
        arm.append(interleaved("ch2-nobias", "nobias", f"p{p}", p, seconds))
        base.append(interleaved("ch2-baseline", "baseline", f"p{p}", p, [1.0 + 0.001 * k for k in range(10)]))
    return arm, base


def test_a_verdict_that_only_the_trimmed_mean_gives_is_not_firm():
    arm, base = arms(outliers=(2.0, 1.0, 3.0))
    main = intervals.paired_ratio_interval(record_pairing.paired_units(arm, base).units)
    estimates = sensitivity.other_estimates(arm, base)
    assert set(estimates) == {"untrimmed", "ratio of totals"}
    assert estimates["untrimmed"][0] < main[0] and estimates["ratio of totals"][0] < main[0]  # they keep the slow block
    row = next(r for r in stats_rows.build(Loaded(arm + base, [], 1)) if r.experiment == "ch2-nobias")
    assert row.verdict == intervals.REPRODUCED  # the trimmed estimate's: 1.19 [1.19, 1.20] inside [1.006, 1.362]
    assert "not firm: the untrimmed estimate 1.13 [0.98, 1.29] is inconclusive" in row.why


def test_a_verdict_every_estimate_agrees_on_says_nothing_more():
    arm, base = arms(outliers=(1.0, 1.0, 1.0))
    row = next(r for r in stats_rows.build(Loaded(arm + base, [], 1)) if r.experiment == "ch2-nobias")
    assert row.verdict == intervals.REPRODUCED and "not firm" not in row.why and "at the edge" not in row.why
