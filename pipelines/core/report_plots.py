"""Report plots (matplotlib, Agg, PNG): published vs reproduced bars per experiment family, the
accuracy-vs-speed trade-off, and scaling curves (thread sweeps, ranks, GPUs) with ideal scaling drawn in.

Figures are built with `matplotlib.figure.Figure` directly (no pyplot, no global backend state), which
renders through Agg. Every plot is made from report rows or record fields only.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pipelines.core import report_rows
from pipelines.core.report_rows import Row, stat

PUBLISHED, MEASURED = "#9e9e9e", "#1f77b4"


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _label(row: Row) -> str:
    return f"{row.experiment}\n[{row.variant}]"


def family_bars(rows: list[Row], out_dir: Path) -> list[tuple[Path, str]]:
    """Per family: speed-up vs baseline and accuracy, published vs reproduced, side by side."""
    families: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r.published_ratio is not None or r.ratio is not None or r.published_accuracy is not None \
                or r.accuracy.mean is not None:
            families[r.family].append(r)
    made = []
    for family, members in sorted(families.items()):
        with_acc = [r for r in members if r.published_accuracy is not None or r.accuracy.mean is not None]
        panels = 2 if with_acc else 1
        fig = _figure(max(6.0, 1.3 * len(members) + 2), 4.2 * panels)
        axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
        _bars(axes[0], members, _published_speedup, lambda r: r.ratio if r.verdict != "baseline"
              else (1.0 if r.n else None), "speed-up vs baseline (x)")
        axes[0].axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        axes[0].set_title(f"{family}: published vs reproduced (speed-up = baseline time / time)")
        if with_acc:
            _bars(axes[1], with_acc, lambda r: r.published_accuracy, lambda r: r.accuracy.mean,
                  "test accuracy (%)", errors=lambda r: r.accuracy.sd)
            axes[1].set_title(f"{family}: accuracy (bench-scale accuracy is after a few steps)")
        path = out_dir / f"{family}-published-vs-reproduced.png"
        fig.savefig(path)
        made.append((path, f"{family}: published vs reproduced speed-up and accuracy"))
    return made


def _published_speedup(row: Row) -> float | None:
    """The published ratio; 1 for a baseline arm that has a published time (ratio 1 by definition)."""
    if row.published_ratio is not None or row.entry is None:
        return row.published_ratio
    is_reference = report_rows.baseline_key(row.entry, row.variant) is None
    return 1.0 if is_reference and row.published_time_s is not None else None


def _bars(ax, rows: list[Row], published, measured, ylabel: str, errors=None) -> None:
    width = 0.38
    xs = list(range(len(rows)))
    pub = [published(r) for r in rows]
    mea = [measured(r) for r in rows]
    ax.bar([x - width / 2 for x in xs], [v or 0 for v in pub], width, color=PUBLISHED, label="published")
    ax.bar([x + width / 2 for x in xs], [v or 0 for v in mea], width, color=MEASURED, label="reproduced",
           yerr=[errors(r) or 0 for r in rows] if errors else None, capsize=3)
    for x, p, m in zip(xs, pub, mea):
        for offset, value in ((-width / 2, p), (width / 2, m)):
            ax.annotate("n/a" if value is None else f"{value:.2f}", (x + offset, value or 0), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(xs, [_label(r) for r in rows], fontsize=7)
    ax.set_ylabel(ylabel)
    errs = [(errors(r) or 0) if errors else 0 for r in rows]
    tops = [v for v in pub if v is not None] + [m + e for m, e in zip(mea, errs) if m is not None]
    top = max(tops or [1.0])
    ax.set_ylim(0, top * 1.25)  # headroom for the value labels and the legend
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    ax.grid(axis="y", alpha=0.3)


def tradeoff(rows: list[Row], out_dir: Path) -> list[tuple[Path, str]]:
    """Accuracy against speed-up, published (hollow) and reproduced (filled), one label per arm."""
    from pipelines.core.report_doc import tradeoff_rows

    chosen = tradeoff_rows(rows)
    if not chosen:
        return []
    fig = _figure(7.5, 5.0)
    ax = fig.subplots()
    for r in chosen:
        pub_x = r.published_ratio
        if pub_x is None and r.verdict == "baseline":
            pub_x = 1.0
        mea_x = r.ratio if r.ratio is not None else (1.0 if r.verdict == "baseline" and r.n else None)
        if pub_x is not None and r.published_accuracy is not None:
            ax.scatter(pub_x, r.published_accuracy, facecolors="none", edgecolors=PUBLISHED, s=60)
            ax.annotate(f"{r.variant} (book)", (pub_x, r.published_accuracy), fontsize=7, xytext=(4, 2),
                        textcoords="offset points", color="#555555")
        if mea_x is not None and r.accuracy.mean is not None:
            ax.scatter(mea_x, r.accuracy.mean, color=MEASURED, s=40)
            ax.annotate(r.variant, (mea_x, r.accuracy.mean), fontsize=7, xytext=(4, -8),
                        textcoords="offset points", color=MEASURED)
    ax.scatter([], [], facecolors="none", edgecolors=PUBLISHED, label="published")
    ax.scatter([], [], color=MEASURED, label="reproduced")
    ax.set_xlabel("speed-up vs baseline (x)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Accuracy vs speed (" + ", ".join(sorted({r.family for r in chosen})) + ")")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    path = out_dir / "accuracy-vs-speed.png"
    fig.savefig(path)
    return [(path, "accuracy vs speed-up: published (hollow) and reproduced (filled)")]


def workers(rec: dict[str, Any]) -> int:
    """Parallel workers a record used: GPUs (ranks) on CUDA, ranks x torch threads on the CPU."""
    ranks = int((rec.get("dist") or {}).get("world_size") or 1)
    if rec["config"].get("device") == "cuda":
        return ranks
    return ranks * int(rec["env"].get("torch_threads") or 1)


def scaling_series(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (experiment, scale) with >= 2 distinct worker counts (or ranks): x -> mean throughput."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        if rec["status"] == "ok" and rec["metrics"].get("throughput_samples_per_s") \
                and rec["experiment"] != report_rows.HARNESS_ID:
            grouped[(rec["experiment"], rec["scale"])].append(rec)
    series = {}
    for key, recs in grouped.items():
        for axis, value in (("workers", workers), ("ranks", lambda r: int(r["dist"].get("world_size") or 1))):
            points: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for rec in recs:
                points[value(rec)].append(rec)
            if len(points) >= 2:
                series[key] = {"axis": axis, "points": {
                    x: (stat(r["metrics"]["throughput_samples_per_s"] for r in rs),
                        sorted({r["variant"] for r in rs}))
                    for x, rs in sorted(points.items())}}
                break
    return series


def scaling(records: list[dict[str, Any]], out_dir: Path) -> list[tuple[Path, str]]:
    made = []
    for (experiment, scale), s in sorted(scaling_series(records).items()):
        xs = list(s["points"])
        base = s["points"][xs[0]][0].mean
        speedups = [s["points"][x][0].mean / base for x in xs]
        fig = _figure(6.5, 4.5)
        ax = fig.subplots()
        ax.plot(xs, speedups, marker="o", color=MEASURED, label="reproduced")
        if s["axis"] == "workers":
            ax.plot(xs, [x / xs[0] for x in xs], linestyle="--", color="black", label="ideal (linear)")
            ax.set_xlabel("parallel workers (ranks x threads on CPU, GPUs on CUDA)")
        else:
            ax.axhline(1.0, linestyle="--", color="black", label="ideal at equal total cores")
            ax.set_xlabel("ranks (same total cores)")
        for x, y in zip(xs, speedups):
            ax.annotate(",".join(s["points"][x][1])[:24], (x, y), fontsize=7, xytext=(4, -10),
                        textcoords="offset points")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_ylabel(f"speed-up vs {xs[0]} ({s['points'][xs[0]][0].mean:.0f} samples/s)")
        ax.set_title(f"{experiment} ({scale}): scaling")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        path = out_dir / f"scaling-{experiment}-{scale}.png"
        fig.savefig(path)
        made.append((path, f"{experiment} ({scale}): throughput speed-up against workers, ideal dashed"))
    return made


def all_plots(rows: list[Row], records: list[dict[str, Any]], out_dir: Path) -> list[tuple[Path, str]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return family_bars(rows, out_dir) + tradeoff(rows, out_dir) + scaling(records, out_dir)
