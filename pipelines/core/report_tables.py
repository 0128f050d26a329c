"""The report's tables as pandas DataFrames: `frame(rows)` holds every Row column as data (numbers stay
numbers; it is what report.csv is), and the views below turn it into the strings a reader sees, every
number through the one formatter (report_stats.fmt). Markdown and HTML render these same views.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines.core import report_rows
from pipelines.core import report_stats as stats
from pipelines.core.report_rows import Row


def frame(rows: list[Row]) -> pd.DataFrame:
    """One line per row, one column per Row field (the CSV)."""
    return pd.DataFrame([row.data() for row in rows], columns=Row.columns())


def _pm(means, sds, digits: int = 1) -> list[str]:
    return [stats.Stat(1, m, None if pd.isna(s) else s).text(digits) if pd.notna(m) else "-"
            for m, s in zip(means, sds)]


def _pair(lows, highs, template: str) -> list[str]:
    return ["-" if pd.isna(low) else template.format(stats.fmt(low), stats.fmt(high))
            for low, high in zip(lows, highs)]


def interval_text(ratios, lows, highs) -> list[str]:
    """'[low, high]', 'no interval' where a point ratio has none, '-' where there is no ratio."""
    return ["-" if pd.isna(ratio) else "no interval" if pd.isna(low) else stats.Interval(low, high).text()
            for ratio, low, high in zip(ratios, lows, highs)]


def results_view(data: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "experiment": data.experiment, "variant": data.variant, "scale": data.scale, "n": data.n,
        "published time": data.published_time, "published ratio": data.published_ratio.map(stats.fmt),
        "band": _pair(data.band_low, data.band_high, "{}-{}"),
        "samples/s (mean ± sd)": _pm(data.throughput_mean, data.throughput_sd),
        "measured ratio": data.ratio.map(stats.fmt),
        "95 % interval": interval_text(data.ratio, data.ci_low, data.ci_high),
        "verdict": data.verdict, "compared with": data.baseline, "why": data.why})


def summary_view(data: pd.DataFrame) -> pd.DataFrame:
    """The compact table `accel report` prints: one line per arm, ratio with its interval, verdict."""
    scale = data.scale.map(lambda s: "" if s in ("bench", "-") else f" ({s})")
    return pd.DataFrame({
        "experiment": data.experiment, "variant": data.variant + scale, "n": data.n,
        "step ms": data.step_ms_median.map(lambda v: stats.fmt(v, 1)),
        "samples/s (mean ± sd)": _pm(data.throughput_mean, data.throughput_sd),
        "ratio": data.ratio.map(stats.fmt),
        "95 % interval": interval_text(data.ratio, data.ci_low, data.ci_high),
        "published": data.published_ratio.map(lambda v: "-" if pd.isna(v) else f"{v:g}"),
        "verdict": [verdict + (f" ({why})" if verdict == "not comparable" else "")
                    for verdict, why in zip(data.verdict, data.why)],
    })


def accuracy_view(rows: list[Row]) -> pd.DataFrame:
    """Measured accuracy per arm (a learning check) and its difference to the baseline arm, only at
    equal samples seen. No published column: that comparison is `book_accuracy_view`'s alone."""
    by_key = {row.key: row for row in rows}
    lines = []
    for row in rows:
        if row.accuracy_mean is None:
            continue
        delta, why = report_rows.accuracy_delta(row, by_key)
        lines.append({"experiment": row.experiment, "variant": row.variant, "scale": row.scale,
                      "data": row.data_source, "samples seen": stats.fmt(row.samples_seen, 0),
                      "acc % (mean ± sd)": stats.Stat(row.n, row.accuracy_mean, row.accuracy_sd).text(),
                      "Δ vs baseline arm (pp)": "-" if delta is None else f"{delta:+.2f}", "note": why})
    return pd.DataFrame(lines)


def book_accuracy_view(rows: list[Row]) -> pd.DataFrame:
    """Measured against published accuracy: book-scale runs on the real data set only."""
    lines = [{"experiment": row.experiment, "variant": row.variant, "n": row.n,
              "acc % (mean ± sd)": stats.Stat(row.n, row.accuracy_mean, row.accuracy_sd).text(),
              "published acc %": stats.fmt(row.published_accuracy),
              "Δ vs published (pp)": f"{row.accuracy_mean - row.published_accuracy:+.2f}"}
             for row in rows if report_rows.book_accuracy(row) and row.accuracy_mean is not None
             and row.published_accuracy is not None]
    return pd.DataFrame(lines)


def harness(records: list[dict[str, Any]]) -> pd.DataFrame | None:
    """Shared loop vs hand-written loop throughput, from ci/harness-overhead.py's records: one row per
    workload (model, batch size, device), since a small CNN and a ViT-B/16 must not share a mean."""
    recs = [r for r in records if r["experiment"] == report_rows.HARNESS_ID and r["status"] == "ok"]

    def workload(record: dict[str, Any]) -> tuple[str, int, str]:
        config = record["config"]
        return config.get("model", "?"), int(config.get("batch_size") or 0), config.get("device", "?")

    lines = []
    for model, batch, device in sorted({workload(r) for r in recs}):
        mine = [r for r in recs if workload(r) == (model, batch, device)]
        values = {name: [r["metrics"].get("throughput_samples_per_s") for r in mine if r["variant"] == name]
                  for name in ("shared-loop", "hand-loop")}
        shared, hand = (stats.stat(values[name]) for name in ("shared-loop", "hand-loop"))
        if not shared.mean or not hand.mean:
            continue
        ratio, interval = stats.ratio_interval(stats.whole_repeats(values["shared-loop"]),
                                               stats.whole_repeats(values["hand-loop"]))
        lines.append({"workload": f"{model} / batch {batch} / {device}", "n (each loop)": f"{shared.n}/{hand.n}",
                      "shared loop samples/s": shared.text(), "hand-written samples/s": hand.text(),
                      "shared / hand": stats.fmt(ratio, 3), "95 % interval (repeats)": interval.text(3),
                      "overhead %": round((1 - ratio) * 100, 1)})
    return pd.DataFrame(lines) if lines else None
