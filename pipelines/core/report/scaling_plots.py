"""Scaling curves (threads, ranks, GPUs): the measured speed-up beside the published curve and ideal scaling.

The published curve comes from the catalog (Table 9.1's times as speed-ups vs 1 thread); a sweep over ranks
at the same total cores is drawn against a flat ideal instead of a linear one.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pipelines.core.config import experiments
from pipelines.core.report.figures import MEASURED, PUBLISHED, figure, save
from pipelines.core.stats import intervals, pairing
from pipelines.core.stats.bases import harness


def scaling_series(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (experiment, scale) with >= 2 distinct worker counts (or ranks): x -> mean throughput."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        if rec["status"] == "ok" and rec["metrics"].get("throughput_samples_per_s") \
                and not harness.ours(rec):
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
        fig = figure(6.5, 4.5)
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
        save(fig, path)
        made.append((path, f"{experiment} ({scale}): speed-up against workers, published curve beside, "
                           "ideal dashed"))
    return made
