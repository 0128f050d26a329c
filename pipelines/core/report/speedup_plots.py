"""Speed-up bars, one figure per experiment family: published beside reproduced.

The published ratio beside the measured ratio with its 95 % interval as whiskers, and the band a shaded box
across and over both bars, so the whiskers are seen inside or outside the box that judges them; an
arm without per-step times is hatched ("no interval"); an arm that did not run gets no bar at all, only the
words "not run" (with its published figure) at its place: a grey bar there read as a measurement.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from pipelines.core.report.figures import (
    BAND, MEASURED, PUBLISHED, figure, measured_speedup, published_speedup, save
)
from pipelines.core.stats import intervals
from pipelines.core.stats.rows import Row

WIDTH = 0.38
LEGEND = (Patch(color=PUBLISHED, label="published"), Patch(color=BAND, alpha=0.3, label="band"),
          Patch(color=MEASURED, label="reproduced"),
          Patch(facecolor="white", edgecolor=MEASURED, hatch="//", label="reproduced, no interval"))


def ran(row: Row) -> bool:
    """Whether the arm has finished repeats to measure (an interrupted-only arm has none)."""
    return row.n > 0


def _by_family(rows: list[Row], keep) -> dict[str, list[Row]]:
    families: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if keep(row):
            families[row.family].append(row)
    return dict(sorted(families.items()))


def speedup_bars(rows: list[Row], out_dir: Path) -> list[tuple[Path, str]]:
    made = []
    keep = lambda r: published_speedup(r) is not None or measured_speedup(r) is not None  # noqa: E731
    for family, members in _by_family(rows, keep).items():
        fig = speedup_figure(family, members)
        path = out_dir / f"{family}-published-vs-reproduced.png"
        save(fig, path)
        made.append((path, f"{family}: published vs reproduced speed-up, band and 95 % interval"))
    return made


def speedup_figure(family: str, members: list[Row]) -> Figure:
    """One family's bars. The legend goes below the axes (the constrained layout makes room for it), not
    over the bars: inside the axes it covered the tallest bars' labels, and in a narrow figure it ran past
    the edge."""
    fig = figure(max(6.0, 1.2 * len(members) + 2), 4.8)
    ax = fig.subplots()
    one_experiment = len({r.experiment for r in members}) == 1
    for x, row in enumerate(members):
        if ran(row):
            _arm_bars(ax, x, row)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(members)), [r.variant if one_experiment else f"{r.experiment}\n[{r.variant}]"
                                        for r in members], fontsize=7)
    ax.set_xlim(-0.6, len(members) - 0.4)
    ax.set_ylabel("speed-up vs baseline (x) = baseline time / time")
    ax.set_title(f"{family}: published (band: the effect rule) vs reproduced (95 % interval)", fontsize=10)
    fig.legend(handles=LEGEND, fontsize=7, loc="outside lower center", ncol=4)
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.2) * 1.1)  # headroom for the value labels
    for x, row in enumerate(members):
        if not ran(row):
            _not_run(ax, x, row)
    ax.grid(axis="y", alpha=0.3)
    return fig


def _not_run(ax, x: int, row: Row) -> None:
    """Words, not a bar, where an arm did not run; its published figure stays readable in the text."""
    published = published_speedup(row)
    text = row.verdict if row.verdict != "not run" else "not run"
    if published is not None:
        text += f"\n(published {intervals.fmt(published)})"
    ax.annotate(text, (x, 0.03), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=7,
                color="dimgrey", style="italic")


def _arm_bars(ax, x: int, row: Row) -> None:
    published, measured = published_speedup(row), measured_speedup(row)
    if row.band_low is not None:  # across both bars and over them: it judges the reproduced bar's interval
        ax.bar(x, row.band_high - row.band_low, 2 * WIDTH + 0.08, bottom=row.band_low, facecolor=BAND, alpha=0.3,
               edgecolor=BAND, linewidth=1.2, zorder=3)
    if published is not None:
        ax.bar(x - WIDTH / 2, published, WIDTH, color=PUBLISHED)
        ax.annotate(intervals.fmt(published), (x - WIDTH / 2, published), ha="center", va="bottom", fontsize=6,
                    xytext=(0, 2), textcoords="offset points")
    if measured is None:  # ran, but the report refuses the ratio (the table says why)
        ax.annotate(row.verdict, (x + WIDTH / 2, 0.03), xycoords=("data", "axes fraction"), ha="center",
                    va="bottom", fontsize=6, color=MEASURED, rotation=90)
        return
    interval = row.interval
    if interval is not None:
        ax.bar(x + WIDTH / 2, measured, WIDTH, color=MEASURED, capsize=3,
               yerr=[[measured - interval.low], [interval.high - measured]])
    elif row.verdict == "baseline":
        ax.bar(x + WIDTH / 2, measured, WIDTH, color=MEASURED)  # 1 by definition: nothing to bound
    else:
        ax.bar(x + WIDTH / 2, measured, WIDTH, facecolor="white", edgecolor=MEASURED, hatch="//")
    top = interval.high if interval is not None else measured
    ax.annotate(intervals.fmt(measured), (x + WIDTH / 2, top), ha="center", va="bottom", fontsize=6,
                xytext=(0, 2), textcoords="offset points", color=MEASURED)
