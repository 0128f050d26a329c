"""The report's first screen: its answer before its tables. The verdict counts and the machine in two lines,
then a forest plot of every judged arm: its measured ratio and 95 % interval against the band the
published figure allows, on one log axis, so that 0.5x and 2x lie as far from 1 and a reader sees at a
glance which arms reproduce, which miss and which are undecided."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from matplotlib.ticker import NullLocator

from pipelines.core.config.arm import Arm
from pipelines.core.report.figures import PUBLISHED, figure, save
from pipelines.core.stats import intervals
from pipelines.core.stats.rows import Row

FOREST_PNG = "forest.png"
VERDICT_COLOURS = {intervals.REPRODUCED: "#2ca02c", intervals.FASTER: "#1f77b4", intervals.SLOWER: "#d62728",
                   intervals.INCONCLUSIVE: "#7f7f7f"}
ORDER = (intervals.REPRODUCED, intervals.FASTER, intervals.SLOWER, intervals.INCONCLUSIVE)


def forest_rows(rows: Sequence[Row]) -> list[Row]:
    """The arms the plot holds: those judged against a published figure, with a measured interval."""
    return [r for r in rows if r.verdict in VERDICT_COLOURS and None not in (r.ratio, r.ci_low, r.ci_high)
            and r.band_low is not None and r.band_high is not None]


def counts_line(rows: Sequence[Row]) -> str:
    """'3 reproduced, 1 slower than published, 2 inconclusive; 4 more arms measured without a published
    figure': every judged word, in one fixed order, zeros left out."""
    words = [r.verdict for r in rows if r.verdict != "baseline"]
    parts = [f"{words.count(word)} {word}" for word in ORDER if words.count(word)]
    other = len(words) - sum(words.count(word) for word in ORDER)
    if other:
        parts.append(f"{other} other arm(s) (measured without a published figure, not comparable or not run)")
    return ", ".join(parts) or "no judged arm"


def forest_plot(rows: Sequence[Row]):
    """One line per judged arm, top to bottom in report order: the band as a pale box on the arm's own row,
    the published ratio as a grey tick, the interval as a bar in its verdict's colour, the ratio as a dot."""
    judged = forest_rows(rows)
    fig = figure(7.5, 0.9 + 0.32 * max(len(judged), 1))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    for y, row in enumerate(judged):
        colour = VERDICT_COLOURS[row.verdict]
        ax.barh(y, row.band_high - row.band_low, left=row.band_low, height=0.7, color=colour, alpha=0.18,
                linewidth=0)
        ax.plot([row.published_ratio] * 2, [y - 0.35, y + 0.35], color=PUBLISHED, linewidth=2)
        ax.plot([row.ci_low, row.ci_high], [y, y], color=colour, linewidth=2.5, solid_capstyle="butt")
        ax.plot([row.ratio], [y], "o", color=colour, markersize=5)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_yticks(range(len(judged)), [str(Arm.of(r)) for r in judged], fontsize=8)
    ax.set_ylim(len(judged) - 0.5, -0.5)
    ends = [v for r in judged for v in (r.ci_low, r.ci_high, r.band_low, r.band_high)] or [0.5, 2.0]
    low, high = min(min(ends), 0.95), max(max(ends), 1.05)
    ax.set_xlim(low / 1.08, high * 1.08)
    ticks = [t for t in (0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8)
             if low / 1.08 <= t <= high * 1.08]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())  # a log axis's own would print 3x10^-1 beside 0.25
    ax.set_xlabel("speed-up against the baseline arm (log scale); box: the band the published figure allows, "
                  "grey tick: published", fontsize=8)
    for word in ORDER:
        ax.plot([], [], color=VERDICT_COLOURS[word], linewidth=2.5, label=word)
    fig.legend(loc="outside upper center", ncols=4, fontsize=8, frameon=False)
    return fig


def add(doc, rows: Sequence[Row], machine_lines: list[str], plots_dir: Path | None) -> None:
    """The summary section at the top of `doc`: counts, machine, and (with a folder for plots) the forest plot."""
    doc.add("h", "Summary")
    doc.add("p", f"**Verdicts:** {counts_line(rows)}.")
    doc.add("p", "**Machine:** " + ("; ".join(machine_lines) or "(no records)"))
    if plots_dir is not None and forest_rows(rows):
        path = plots_dir / FOREST_PNG
        save(forest_plot(rows), path)
        doc.add("img", path.name, "Every judged arm: its 95 % interval (bar) and ratio (dot) against the band "
                                  "its published figure allows (box), on a log scale.")


def hardware(env: dict[str, Any]) -> str:
    """'CPU model (N logical CPUs), GPUs': the machine as every machine line of the report begins."""
    gpus = ", ".join(g["name"] for g in env.get("gpus") or []) or "no GPU"
    return f"{env.get('cpu_model')} ({env.get('logical_cpus')} logical CPUs), {gpus}"


def machine_summary(records: list[dict[str, Any]]) -> list[str]:
    """The machine in a few words per class (the Machines section below gives the whole line)."""
    return list(dict.fromkeys(f"{hardware(rec.get('env') or {})}, torch {(rec.get('env') or {}).get('torch')}"
                              for rec in records))
