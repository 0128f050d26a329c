"""Accuracy against speed-up, one panel per reference arm: each arm's published point joined to its reproduced one.

The accuracy axis spans at least MIN_ACCURACY_SPAN_PP (see there) so noise does not fill the panel. A
reproduced accuracy is plotted only for book-scale runs on real data; otherwise the reproduced point keeps the
published accuracy, drawn as a cross on a dotted line: the speed moved, the accuracy was not compared (bench
scale is a learning check).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pipelines.core.config import experiments
from pipelines.core.report.figures import COLOURS, PUBLISHED, figure, measured_speedup, published_speedup, save
from pipelines.core.stats import pairing
from pipelines.core.stats import rows as stats_rows
from pipelines.core.stats.rows import Row

# The accuracy axis's smallest span, in percentage points. A test set of 10,000 images (Fashion-MNIST's,
# CIFAR-10's) gives one run's accuracy a binomial standard error of at most sqrt(0.5 * 0.5 / 10000) =
# 0.5 pp, so the difference of two runs has a 95 % half-width of up to 1.96 * sqrt(2) * 0.5 = 1.4 pp
# before seed-to-seed spread is even counted. On a 5-pp axis that much noise fills under a third of the
# height; autoscaling to the data instead stretched a 0.16-pp gap between two published accuracies
# (92.50 vs 92.34) over the whole panel, as if it were a large accuracy loss.
MIN_ACCURACY_SPAN_PP = 5.0


def _reference(row: Row) -> tuple[str, str]:
    """The arm a row's published speed-up is measured against (itself for a reference arm)."""
    base = pairing.declared_baseline(row.entry, row.variant) if row.entry else None
    return base or (row.experiment, row.variant)


Panel = tuple[tuple[str, str], float | None, list[Row]]  # (reference arm, its accuracy if not a member, arms)


def tradeoff(rows: list[Row], out_dir: Path) -> list[tuple[Path, str]]:
    """Accuracy against speed-up, one panel per reference arm (so every x in a panel is a speed-up over the
    same run); each arm has its own colour, named in the panel's legend, so no label can overlap a point."""
    panels = tradeoff_panels(rows)
    if not panels:
        return []
    path = out_dir / "accuracy-vs-speed.png"
    save(tradeoff_figure(panels), path)
    return [(path, "accuracy vs speed-up, one panel per reference arm: published (hollow) joined to "
                   "reproduced")]


def tradeoff_panels(rows: list[Row]) -> list[Panel]:
    """The panels of `tradeoff`: arms with a published speed-up and accuracy, grouped by reference arm;
    a panel needs two points at least (its members, and the reference's published accuracy)."""
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        if published_speedup(row) is not None and row.published_accuracy is not None and not row.accuracy_context:
            groups[_reference(row)].append(row)
    panels = []  # (reference arm, its published accuracy unless it is a member itself, members)
    for (base_id, base_arm), members in groups.items():
        base = experiments.all_experiments().get(base_id)
        inside = (base_id, base_arm) in {r.key[:2] for r in members}
        accuracy = None if inside or base is None else pairing.published(base, "test_accuracy_pct", base_arm)
        if len(members) + (accuracy is not None) >= 2:
            panels.append(((base_id, base_arm), accuracy, members))
    return panels


def tradeoff_figure(panels: list[Panel]) -> Figure:
    """The panels of `tradeoff`. The shared legend's three entries go side by side under two or more
    panels and stacked under one: side by side they are wider (about 7 inches at 8 pt) than a one-panel
    figure (4.8 inches), and the saved image cut them off."""
    columns = min(3, len(panels))
    lines = math.ceil(len(panels) / columns)
    fig = figure(4.8 * columns, 3.9 * lines + 0.6)
    axes = fig.subplots(lines, columns, squeeze=False).ravel()
    for ax, ((base_id, base_arm), base_accuracy, members) in zip(axes, panels):
        accuracies = []
        if base_accuracy is not None:
            ax.scatter(1.0, base_accuracy, marker="s", facecolors="none", edgecolors="black", s=50,
                       label=f"{base_arm} (reference)")
            accuracies.append(base_accuracy)
        for index, row in enumerate(members):
            accuracies += _arm_points(ax, row, COLOURS[index % len(COLOURS)])
        ax.set_ylim(*accuracy_limits(accuracies))
        ax.set_title(f"vs {base_id} [{base_arm}]", fontsize=8)
        ax.set_xlabel("speed-up vs the reference arm (x)", fontsize=8)
        ax.set_ylabel("test accuracy (%)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="best")
        ax.grid(alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.legend(handles=[
        Line2D([], [], marker="o", linestyle="", markerfacecolor="none", color=PUBLISHED, label="published"),
        Line2D([], [], marker="o", color=PUBLISHED, label="reproduced (book scale, real data)"),
        Line2D([], [], marker="x", linestyle=":", color=PUBLISHED,
               label="reproduced speed-up only (accuracy not compared)")], loc="outside lower center",
        ncol=3 if columns > 1 else 1, fontsize=8)
    return fig


def accuracy_limits(values: list[float], span: float = MIN_ACCURACY_SPAN_PP) -> tuple[float, float]:
    """y-limits around the accuracies `values`: the data plus 10 % margin, widened about its centre to at
    least `span` points, then moved (not shrunk) to stay inside 0-100 %."""
    low, high = min(values), max(values)
    margin = 0.1 * (high - low)
    low, high = low - margin, high + margin
    if high - low < span:
        centre = (low + high) / 2
        low, high = centre - span / 2, centre + span / 2
    if low < 0:
        low, high = 0.0, high - low
    if high > 100:
        low, high = low - (high - 100), 100.0
    return max(low, 0.0), min(high, 100.0)


def _arm_points(ax, row: Row, colour: str) -> list[float]:
    """Draw one arm; returns the accuracies it plotted (for the panel's y-limits)."""
    x, y = published_speedup(row), row.published_accuracy
    name = row.variant if row.entry is None or row.entry.has_variants else row.experiment
    ax.scatter(x, y, facecolors="none", edgecolors=colour, s=55, label=name)
    measured = measured_speedup(row)
    if measured is None:
        return [y]
    compared = stats_rows.book_accuracy(row) and row.accuracy_mean is not None
    my = row.accuracy_mean if compared else y
    ax.plot([x, measured], [y, my], color=colour, linewidth=0.9, linestyle="-" if compared else ":")
    ax.scatter(measured, my, color=colour, s=30, marker="o" if compared else "x")
    return [y, my]
