"""The report's plots, drawn from hand-made records (tests/recordutil.py) and the committed h100-bench reference:
the speed-up bars draw nothing for an arm that did not run (a "not run" label with its published figure instead),
draw the band across the reproduced bar it judges, and keep the legend inside the figure and off the bars; the
accuracy-vs-speed panels keep their legends inside and their accuracy axis at least MIN_ACCURACY_SPAN_PP wide
within 0-100; `write_report` writes both plots as PNG files; and the scaling curves take their points and axis
(threads or ranks) from the records' fields, beside the published curve."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import to_rgba

from conftest import REPO
from pipelines.core.config import experiments
from pipelines.core.record.results import load
from pipelines.core.report import figures, scaling_plots, speedup_plots, tradeoff_plots
from pipelines.core.report import views as report
from pipelines.core.stats import rows as stats_rows
from recordutil import ch2, record

H100_BENCH = REPO / "results" / "reference" / "h100-bench"


def _inside(fig, artist) -> bool:
    """The artist's drawn box lies within the figure's (one pixel of rounding allowed)."""
    renderer = fig.canvas.get_renderer()
    box, page = artist.get_window_extent(renderer), fig.bbox
    return box.x0 >= page.x0 - 1 and box.y0 >= page.y0 - 1 and box.x1 <= page.x1 + 1 and box.y1 <= page.y1 + 1


def _ch2_rows(tmp_path: Path) -> list[stats_rows.Row]:
    """ch2-baseline and ch2-nobias ran (3 repeats each); ch2-bs128 is listed but did not run."""
    ch2(tmp_path, (1.18,))
    return stats_rows.build(load(tmp_path), ["ch2-bs128"])


def test_speedup_bars_draw_no_bar_for_an_arm_that_did_not_run_and_keep_the_legend_inside(tmp_path):
    rows = _ch2_rows(tmp_path)
    members = [r for r in rows if r.family == "ch2"]
    assert [(r.experiment, r.n) for r in members] == [("ch2-baseline", 3), ("ch2-nobias", 3),
                                                      ("ch2-bs128", 0)]
    fig = speedup_plots.speedup_figure("ch2", members)
    fig.canvas.draw()
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_width() > 0 and p.get_height() > 0]
    not_run_x = 2  # ch2-bs128's slot: nothing may be drawn within half a slot of it
    near = [p for p in bars if not_run_x - 0.5 < p.get_x() + p.get_width() and p.get_x() < not_run_x + 0.5]
    assert not near
    measured = [p for p in bars if p.get_facecolor() == to_rgba(figures.MEASURED)]
    assert len(measured) == sum(1 for r in members if r.n) == 2  # one reproduced bar per arm that ran
    labels = [t.get_text() for t in ax.texts]
    assert any(text.startswith("not run") and "published 1.54" in text for text in labels), labels
    # the band lies across and over both bars of its arm: the reproduced bar's whiskers are read against it
    bands = [p for p in bars if p.get_facecolor()[:3] == to_rgba(figures.BAND)[:3] and p.get_zorder() > 2]
    nobias = next(p for p in measured if 0.5 < p.get_x() < 1.5)
    assert any(band.get_x() <= nobias.get_x() and nobias.get_x() + nobias.get_width() <= band.get_x() +
               band.get_width() for band in bands), [(b.get_x(), b.get_width()) for b in bands]
    (legend,) = fig.legends
    renderer = fig.canvas.get_renderer()
    assert _inside(fig, legend)
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))  # covers no bar


def test_a_one_panel_accuracy_plot_keeps_its_legend_inside_the_figure(tmp_path):
    rows = _ch2_rows(tmp_path)
    panels = tradeoff_plots.tradeoff_panels(rows)
    assert len(panels) == 1  # ch2-baseline's panel only: the narrowest figure the report draws
    fig = tradeoff_plots.tradeoff_figure(panels)
    fig.canvas.draw()
    assert fig.legends and all(_inside(fig, legend) for legend in fig.legends)
    assert all(_inside(fig, ax.get_legend()) for ax in fig.axes if ax.get_visible())


def test_accuracy_axis_spans_at_least_the_minimum_around_the_data():
    """h100-bench's ch5 panel: published 92.50 vs 92.34 filled the whole axis (a 0.16-pp span)."""
    rows = stats_rows.build(load(H100_BENCH))
    fig = tradeoff_plots.tradeoff_figure(tradeoff_plots.tradeoff_panels(rows))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert panels
    for ax in panels:
        low, high = ax.get_ylim()
        assert high - low >= tradeoff_plots.MIN_ACCURACY_SPAN_PP - 1e-9 and 0 <= low and high <= 100
        plotted = [y for line in ax.lines for y in line.get_ydata()]
        plotted += [xy[1] for coll in ax.collections for xy in coll.get_offsets()]
        assert plotted and all(low <= y <= high for y in plotted)
    assert tradeoff_plots.accuracy_limits([92.34, 92.50]) == pytest.approx((89.92, 94.92))
    assert tradeoff_plots.accuracy_limits([99.0, 99.5]) == (95.0, 100.0)  # moved inside 0-100, not shrunk
    assert tradeoff_plots.accuracy_limits([1.0]) == (0.0, 5.0)
    assert tradeoff_plots.accuracy_limits([20.0, 80.0]) == pytest.approx((14.0, 86.0))  # wide: data + 10 %


def test_report_plots_are_written_as_pngs(tmp_path):
    ch2(tmp_path / "r", (1.18,))
    written = report.write_report(tmp_path / "r", tmp_path / "out", formats=("md",), only=["ch2-bs128"])
    pngs = [p for p in written.paths if p.suffix == ".png"]
    assert {p.name for p in pngs} == {"forest.png", "ch2-published-vs-reproduced.png", "accuracy-vs-speed.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_scaling_curves_from_record_fields(tmp_path):
    """Synthetic thread-sweep records (this machine has too few cores for a real sweep)."""
    recs = [record("ch9-cpu-threads", f"threads={t}", 100.0 * t ** 0.8, torch_threads=t)
            for t in (1, 2, 4, 8)]
    series = scaling_plots.scaling_series(recs)
    assert list(series[("ch9-cpu-threads", "bench")]["points"]) == [1, 2, 4, 8]
    ranks = [record("ch2-baseline", "baseline", 100.0 + r, torch_threads=16 // r) for r in (1, 2, 4)]
    for rec, r in zip(ranks, (1, 2, 4)):
        rec["dist"]["world_size"] = r
    assert scaling_plots.scaling_series(ranks)[("ch2-baseline", "bench")]["axis"] == "ranks"
    assert scaling_plots.published_curve(experiments.get("ch9-cpu-threads")) == \
        [(n, pytest.approx(311 / t)) for n, t in ((1, 311), (2, 189), (4, 119), (8, 93), (12, 73), (16, 73))]
    made = scaling_plots.scaling(recs, tmp_path)
    assert [p.name for p, _ in made] == ["scaling-ch9-cpu-threads-bench.png"]

