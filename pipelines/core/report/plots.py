"""Report plots (PNG), drawn so that what they show is what the numbers support:

- speed-up bars per experiment family: the published ratio with its band as a shaded box, the measured
  ratio with its 95 % interval as whiskers; an arm without per-step times is hatched ("no interval");
  an arm that did not run gets no bar at all, only the words "not run" (with its published figure) at
  its place: a grey bar there read as a measurement;
- accuracy vs speed-up, one panel per family: each arm's published point joined to its reproduced one;
  the accuracy axis spans at least MIN_ACCURACY_SPAN_PP (see there) so noise does not fill the panel.
  A reproduced accuracy is plotted only for book-scale runs on real data; otherwise the reproduced
  point keeps the published accuracy, drawn as a cross on a dotted line: the speed moved, the accuracy
  was not compared (bench scale is a learning check);
- scaling curves (threads, ranks, GPUs): measured speed-up beside the published curve from the catalog
  (Table 9.1's times as speed-ups vs 1 thread) and ideal linear scaling.

Figures are `matplotlib.figure.Figure` objects rendered by the Agg canvas (no pyplot, no global state).
Each figure is built by a function that returns it (the tests inspect legends, bars and limits) and
saved by `_save`; legends sit outside the axes, in a margin the constrained layout sizes for them.

Over 300 lines on purpose: one function per figure, sharing the axis and legend helpers above them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from pipelines.core.config import experiments
from pipelines.core.stats import pairing
from pipelines.core.stats import rows as report_rows
from pipelines.core.stats import intervals
from pipelines.core.stats.rows import Row

PUBLISHED, MEASURED, BAND = "#9e9e9e", "#1f77b4", "#2ca02c"
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")  # one per arm in a panel (matplotlib's tab10)
WIDTH = 0.38
# The accuracy axis's smallest span, in percentage points. A test set of 10,000 images (Fashion-MNIST's,
# CIFAR-10's) gives one run's accuracy a binomial standard error of at most sqrt(0.5 * 0.5 / 10000) =
# 0.5 pp, so the difference of two runs has a 95 % half-width of up to 1.96 * sqrt(2) * 0.5 = 1.4 pp
# before seed-to-seed spread is even counted. On a 5-pp axis that much noise fills under a third of the
# height; autoscaling to the data instead stretched a 0.16-pp gap between two published accuracies
# (92.50 vs 92.34) over the whole panel, as if it were a large accuracy loss.
MIN_ACCURACY_SPAN_PP = 5.0
LEGEND = (Patch(color=PUBLISHED, label="published"), Patch(color=BAND, alpha=0.3, label="band"),
          Patch(color=MEASURED, label="reproduced"),
          Patch(facecolor="white", edgecolor=MEASURED, hatch="//", label="reproduced, no interval"))


def _figure(width: float, height: float) -> Figure:
    """A figure on its own Agg canvas (no pyplot): it can be drawn and measured as well as saved."""
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> None:
    """bbox_inches='tight' as a safety net: should an artist (a legend, a long tick label) still reach past
    the figure's edge, the saved image grows to include it instead of cutting it off."""
    fig.savefig(path, bbox_inches="tight", pad_inches=0.05)


def ran(row: Row) -> bool:
    """Whether the arm has finished repeats to measure (an interrupted-only arm has none)."""
    return row.n > 0


def published_speedup(row: Row) -> float | None:
    """The published ratio; 1 for a reference arm that has a published time (ratio 1 by definition)."""
    if row.published_ratio is not None or row.entry is None:
        return row.published_ratio
    reference = pairing.declared_baseline(row.entry, row.variant) is None
    return 1.0 if reference and row.published_time_s is not None else None


def measured_speedup(row: Row) -> float | None:
    """The measured ratio; 1 for a reference arm that ran; none where the report refuses the comparison."""
    if row.verdict == "not comparable":
        return None
    return 1.0 if row.verdict == "baseline" and row.n else row.ratio


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
        _save(fig, path)
        made.append((path, f"{family}: published vs reproduced speed-up, band and 95 % interval"))
    return made


def speedup_figure(family: str, members: list[Row]) -> Figure:
    """One family's bars. The legend goes below the axes (the constrained layout makes room for it), not
    over the bars: inside the axes it covered the tallest bars' labels, and in a narrow figure it ran past
    the edge."""
    fig = _figure(max(6.0, 1.2 * len(members) + 2), 4.8)
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
    ax.set_title(f"{family}: published (band = ±tolerance) vs reproduced (95 % interval)", fontsize=10)
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
    if row.band_low is not None:
        ax.bar(x - WIDTH / 2, row.band_high - row.band_low, WIDTH * 1.3, bottom=row.band_low, color=BAND,
               alpha=0.3)
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
    _save(tradeoff_figure(panels), path)
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
    fig = _figure(4.8 * columns, 3.9 * lines + 0.6)
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
    compared = report_rows.book_accuracy(row) and row.accuracy_mean is not None
    my = row.accuracy_mean if compared else y
    ax.plot([x, measured], [y, my], color=colour, linewidth=0.9, linestyle="-" if compared else ":")
    ax.scatter(measured, my, color=colour, s=30, marker="o" if compared else "x")
    return [y, my]


def scaling_series(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (experiment, scale) with >= 2 distinct worker counts (or ranks): x -> mean throughput."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        if rec["status"] == "ok" and rec["metrics"].get("throughput_samples_per_s") \
                and rec["experiment"] != report_rows.HARNESS_ID:
            grouped[(rec["experiment"], rec["scale"])].append(rec)
    series = {}
    for key, recs in grouped.items():
        for axis, value in (("workers", pairing.total_cores),
                            ("ranks", lambda r: int(r["dist"].get("world_size") or 1))):
            points: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for rec in recs:
                points[value(rec)].append(rec)
            if len(points) >= 2:
                series[key] = {"axis": axis, "points": {
                    x: (intervals.stat(r["metrics"]["throughput_samples_per_s"] for r in rs),
                        sorted({r["variant"] for r in rs}))
                    for x, rs in sorted(points.items())}}
                break
    return series


def published_curve(entry: experiments.Experiment | None) -> list[tuple[int, float]]:
    """(threads or ranks, published speed-up) of a self-contained sweep; its first arm is 1 by definition."""
    if entry is None or entry.baseline or not entry.has_variants:
        return []
    curve = []
    for index, arm in enumerate(entry.variants):
        count = arm.options.get("threads") or arm.options.get("ranks")
        ratio = 1.0 if index == 0 else pairing.published(entry, "ratio", arm.name)
        if count and ratio is not None:
            curve.append((int(count), ratio))
    return curve if len(curve) >= 2 else []


def scaling(records: list[dict[str, Any]], out_dir: Path) -> list[tuple[Path, str]]:
    made = []
    entries = experiments.all_experiments()
    for (experiment, scale), s in sorted(scaling_series(records).items()):
        xs = list(s["points"])
        base = s["points"][xs[0]][0].mean
        fig = _figure(6.5, 4.5)
        ax = fig.subplots()
        ax.plot(xs, [s["points"][x][0].mean / base for x in xs], marker="o", color=MEASURED, zorder=4,
                label=f"reproduced ({scale})")
        curve = published_curve(entries.get(experiment)) if s["axis"] == "workers" else []
        if curve:
            ax.plot(*zip(*curve), marker="s", color=PUBLISHED, label="published")
        if s["axis"] == "workers":
            ideal = sorted(set(xs) | {c for c, _ in curve})
            ax.plot(ideal, [x / xs[0] for x in ideal], linestyle="--", color="black", label="ideal (linear)")
            ax.set_xlabel("parallel workers (ranks x threads on CPU, GPUs on CUDA)")
        else:
            ax.axhline(1.0, linestyle="--", color="black", label="ideal at equal total cores")
            ax.set_xlabel("ranks (same total cores)")
        ticks = sorted(set(xs) | {c for c, _ in curve})
        ax.set_xticks(ticks, [str(x) for x in ticks])
        ax.set_ylabel(f"speed-up vs {xs[0]} ({intervals.fmt(base, 0)} samples/s reproduced)")
        ax.set_title(f"{experiment}: scaling, published beside reproduced")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        path = out_dir / f"scaling-{experiment}-{scale}.png"
        _save(fig, path)
        made.append((path, f"{experiment} ({scale}): speed-up against workers, published curve beside, "
                           "ideal dashed"))
    return made


def all_plots(rows: list[Row], records: list[dict[str, Any]], out_dir: Path) -> list[tuple[Path, str]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return speedup_bars(rows, out_dir) + tradeoff(rows, out_dir) + scaling(records, out_dir)
