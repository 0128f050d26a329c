"""The verdict rule on the effect (core/config/effect.py): the band is half to 1.5 times the published log effect,
between ±5 % and ±15 %, symmetric in log space; no band of a published effect of 10 % or more holds 1.00 anywhere
in the catalog; a figure's own margin needs its reason; and every judged line is one sentence that gives the
band, the direction seen, and for an inconclusive one the rounds that would decide it."""

from __future__ import annotations

import math

import pytest

from pipelines.core.config import effect, experiments
from pipelines.core.stats import intervals

JUDGED = ("ratio", "memory_ratio", "stated_speed_factor_x", "stated_memory_factor_x")


def judged_figures():
    for entry in experiments.all_experiments().values():
        for fig in entry.published:
            if fig.metric in JUDGED and fig.basis != "context":
                yield entry, fig


def test_no_band_of_a_published_effect_of_10_percent_or_more_holds_no_effect():
    checked = 0
    for entry, fig in judged_figures():
        if abs(math.log(fig.same_work_value)) >= math.log(1.10):
            assert not effect.holds_no_effect(fig.band()), (entry.id, fig.variant, fig.band())
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("published, low, high", [
    (148 / 125, (148 / 125) ** 0.5, (148 / 125) ** 1.5),  # half to 1.5 times the effect
    (1.034, 1.034 / 1.05, 1.034 * 1.05),  # below the floor: ±5 %
    (6.49, 6.49 / 1.15, 6.49 * 1.15),  # above the cap: x/1.15
    (0.843, 0.843 ** 1.5, 0.843 ** 0.5),  # a slow-down: the same rule on |ln p|
    (1.0, 1 / 1.05, 1.05)])
def test_the_band_is_symmetric_in_log_space_between_the_floor_and_the_cap(published, low, high):
    band = effect.band(published)
    assert band == pytest.approx((low, high))
    assert math.log(band.high / published) == pytest.approx(math.log(published / band.low))


def test_a_figure_s_own_margin_needs_its_reason_and_a_range_stays_its_own_band():
    with pytest.raises(ValueError, match="needs its reason"):
        experiments.Published("ratio", 2.0, "x", margin=0.25)
    with pytest.raises(ValueError, match="needs its reason"):
        experiments.Published("ratio", 2.0, "x", margin_reason="why")
    with pytest.raises(ValueError, match="fraction between 0 and 1"):
        experiments.Published("x_factor_x", 2.5, "x", low=2, high=3, margin=0.2, margin_reason="why")
    own = experiments.Published("ratio", 2.0, "x", margin=0.25, margin_reason="a one-digit rule of thumb")
    assert own.band() == pytest.approx((1.6, 2.5)) and "a one-digit rule of thumb" in own.rule_text()
    note = experiments.get("s004-amp")
    stated = [fig for fig in note.published if fig.metric == "stated_speed_factor_x"]
    assert stated and all(fig.margin == 0.25 and fig.margin_reason for fig in stated)


def test_the_chapter_2_line_says_what_was_seen():
    """The issue's example: 1.02 [1.01, 1.03] against the book's 148 s -> 125 s is slower than published, and the
    speed-up itself is seen."""
    band = effect.band(148 / 125)
    word = intervals.verdict(intervals.Interval(1.01, 1.03), intervals.Interval(*band))
    said = effect.sentence(word, 1.02, 1.01, 1.03, 148 / 125, band, effect.rule_text(148 / 125),
                           "the book's 148 s -> 125 s")
    assert said == ("slower than published: measured 1.02 [1.01, 1.03], a 1-3 % speed-up; the book's 148 s -> 125 s "
                    "is 1.184x (+18 %); reproducing it needs the interval inside [1.088, 1.288] (half to 1.5 times "
                    "the published effect); the speed-up itself is seen (the interval lies above 1.00)")


def test_directions_and_a_small_published_effect_are_said():
    assert effect.direction_text(1.2, 0.98, 1.04) == "no speed-up seen (the interval contains 1.00)"
    assert effect.direction_text(1.2, 0.80, 0.90).startswith("a slow-down instead")
    assert effect.direction_text(0.84, 0.60, 0.70).startswith("the slow-down itself is seen")
    assert "no effect also reproduces it" in effect.rule_text(1.034)


def test_an_inconclusive_line_says_how_many_rounds_would_decide_or_that_none_would():
    """Zen 4's ch6 s10: 1.04 [0.94, 1.16] over 3 processes against [0.985, 1.086]: about 8 rounds; a ratio at
    the band's edge: no number of rounds."""
    band = effect.band(1.034)
    more = effect.rounds_text(1.044, 0.938, 1.162, band, 3, intervals.t_975)
    assert more.startswith("about ") and "would decide it if the spread stays as this run's" in more
    rounds = int(more.split()[1])
    assert 6 <= rounds <= 12
    at_edge = effect.rounds_text(band.high * 1.001, band.high * 0.95, band.high * 1.05, band, 3, intervals.t_975)
    assert at_edge.startswith("no number of rounds decides")
    said = effect.sentence("inconclusive", 1.044, 0.938, 1.162, 1.034, band, effect.rule_text(1.034), "", 3,
                           intervals.t_975)
    assert "straddles the band [0.985, 1.086]" in said and "no effect also reproduces it" in said
    assert "is wider than the margin (±5 %)" in said and "no speed-up seen" in said
