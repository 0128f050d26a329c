"""The report's tables as pandas DataFrames: `frame(rows)` holds every Row column as data (numbers stay
numbers; it is what report.csv is), and the views below turn it into the strings a reader sees, every
number through the one formatter (stats/intervals.py `fmt`). Markdown and HTML render these same views.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines.core.stats import rows as stats_rows
from pipelines.core.stats import intervals
from pipelines.core.stats.bases import harness as harness_basis
from pipelines.core.stats.rows import Row


def frame(rows: list[Row]) -> pd.DataFrame:
    """One line per row, one column per Row field (the CSV)."""
    return pd.DataFrame([row.data() for row in rows], columns=Row.columns())


def _pm(means, sds, digits: int = 1) -> list[str]:
    return [intervals.Stat(1, m, None if pd.isna(s) else s).text(digits) if pd.notna(m) else "-"
            for m, s in zip(means, sds)]


def _pair(lows, highs, template: str) -> list[str]:
    return ["-" if pd.isna(low) else template.format(intervals.fmt(low), intervals.fmt(high))
            for low, high in zip(lows, highs)]


def interval_text(ratios, lows, highs) -> list[str]:
    """'[low, high]', 'no interval' where a point ratio has none, '-' where there is no ratio."""
    return ["-" if pd.isna(ratio) else "no interval" if pd.isna(low) else intervals.Interval(low, high).text()
            for ratio, low, high in zip(ratios, lows, highs)]


def results_view(data: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "experiment": data.experiment, "variant": data.variant, "scale": data.scale, "n": data.n,
        "published time": data.published_time, "published ratio": data.published_ratio.map(intervals.figure),
        "basis": data.published_basis,
        "band": _pair(data.band_low, data.band_high, "{}-{}"),
        "samples/s (mean ± sd)": _pm(data.throughput_mean, data.throughput_sd),
        "measured ratio": data.ratio.map(intervals.fmt),
        "95 % interval": interval_text(data.ratio, data.ci_low, data.ci_high),
        "judged": data.judged,
        "end-to-end ratio": [f"{intervals.fmt(r)} {interval}" if interval != "-" else "-" for r, interval in
                             zip(data.e2e_ratio, interval_text(data.e2e_ratio, data.e2e_ci_low, data.e2e_ci_high))],
        "verdict": data.verdict, "compared with": data.baseline, "why": data.why, "cause": data.cause})


def machine_view(rows: list[Row]) -> pd.DataFrame:
    """Per measured arm: how many repeats ran on a noisy machine and why; throughput and energy per sample."""
    return pd.DataFrame({
        "experiment": [r.experiment for r in rows], "variant": [r.variant for r in rows],
        "scale": [r.scale for r in rows],
        "noisy repeats": [f"{r.noisy_repeats} of {r.n}" + (f": {r.noisy_reasons}" if r.noisy_reasons else "")
                          if any("machine" in rec for rec in r.records) else "not recorded" for r in rows],
        "samples/s": [intervals.fmt(r.throughput_mean, 1) if r.throughput_mean else "-" for r in rows],
        "J/sample": [f"{r.energy_j_per_sample:.4g}" if r.energy_j_per_sample is not None else "-" for r in rows]})


def verdict_view(data: pd.DataFrame, reasons: bool = True) -> pd.DataFrame:
    """The compact table: one line per arm, ratio with its interval, verdict (`reasons`: a "not comparable"
    verdict carries its reason in the cell; the terminal's table lists the reasons below instead)."""
    scale = data.scale.map(lambda s: "" if s in ("bench", "-") else f" ({s})")
    return pd.DataFrame({
        "experiment": data.experiment, "variant": data.variant + scale, "n": data.n,
        "step ms": data.step_ms_median.map(lambda v: intervals.fmt(v, 1)),
        "samples/s (mean ± sd)": _pm(data.throughput_mean, data.throughput_sd),
        "ratio": data.ratio.map(intervals.fmt),
        "95 % interval": interval_text(data.ratio, data.ci_low, data.ci_high),
        "published": data.published_ratio.map(intervals.figure),
        "verdict": [verdict + (f" ({why})" if verdict == "not comparable" and reasons else "")
                    for verdict, why in zip(data.verdict, data.why)],
    })


def accuracy_view(rows: list[Row]) -> pd.DataFrame:
    """Measured accuracy per arm (a learning check) and its difference to the baseline arm, only at
    equal samples seen (an arm that recorded no count of samples is left out). No published column: that
    comparison is `book_accuracy_view`'s alone."""
    by_key = {row.key: row for row in rows}
    lines = []
    for row in rows:
        if row.accuracy_mean is None or row.samples_seen is None:  # no count of samples: nothing to set it beside
            continue
        delta, why = stats_rows.accuracy_delta(row, by_key)
        lines.append({"experiment": row.experiment, "variant": row.variant, "scale": row.scale,
                      "data": row.data_source, "samples seen": intervals.fmt(row.samples_seen, 0),
                      "acc % (mean ± sd)": intervals.Stat(row.n, row.accuracy_mean, row.accuracy_sd).text(),
                      "Δ vs baseline arm (pp)": "-" if delta is None else f"{delta:+.2f}", "note": why})
    return pd.DataFrame(lines)


def book_accuracy_view(rows: list[Row]) -> pd.DataFrame:
    """Measured against published accuracy: book-scale runs on the real data set only."""
    lines = [{"experiment": row.experiment, "variant": row.variant, "n": row.n,
              "acc % (mean ± sd)": intervals.Stat(row.n, row.accuracy_mean, row.accuracy_sd).text(),
              "published acc %": intervals.fmt(row.published_accuracy),
              "Δ vs published (pp)": ("-" if row.accuracy_context
                                      else f"{row.accuracy_mean - row.published_accuracy:+.2f}"),
              "note": f"context only: {row.accuracy_context}" if row.accuracy_context else ""}
             for row in rows if stats_rows.book_accuracy(row) and row.accuracy_mean is not None
             and row.published_accuracy is not None]
    return pd.DataFrame(lines)


def harness(records: list[dict[str, Any]]) -> pd.DataFrame | None:
    """Shared loop vs hand-written loop throughput, from ci/harness-overhead.py's records: one row per
    workload (model, batch size, device, scale: bench steps or the book's epochs on its data), since a small
    CNN and a ViT-B/16, or 40 steps and 2 epochs, must not share a mean. Each loop's run-to-run spread (the
    coefficient of variation of its training time) is shown too: the book-scale goal is a spread no wider
    than the plain loop's."""
    recs = [r for r in records if harness_basis.ours(r) and r["status"] == "ok"]

    def workload(record: dict[str, Any]) -> tuple[str, int, str, str]:
        config = record["config"]
        scale = ("book: {} epochs of {}".format(config.get("epochs"), config.get("dataset"))
                 if config.get("scale") == "book" else "bench")
        return config.get("model", "?"), int(config.get("batch_size") or 0), config.get("device", "?"), scale

    def spread(mine: list[dict[str, Any]], name: str) -> str:
        times = intervals.stat(r["metrics"].get("train_s") for r in mine if r["variant"] == name)
        return "-" if not times.mean or times.sd is None else f"{100 * times.sd / times.mean:.1f} %"

    lines = []
    for model, batch, device, scale in sorted({workload(r) for r in recs}):
        mine = [r for r in recs if workload(r) == (model, batch, device, scale)]
        values = {name: [r["metrics"].get("throughput_samples_per_s") for r in mine if r["variant"] == name]
                  for name in ("shared-loop", "hand-loop")}
        shared, hand = (intervals.stat(values[name]) for name in ("shared-loop", "hand-loop"))
        if not shared.mean or not hand.mean:
            continue
        ratio, interval = intervals.ratio_interval(intervals.whole_repeats(values["shared-loop"]),
                                               intervals.whole_repeats(values["hand-loop"]))
        cost = harness_basis.overhead(ratio, interval, min(shared.n, hand.n))
        lines.append({"workload": f"{model} / batch {batch} / {device} / {scale}",
                      "n (each loop)": f"{shared.n}/{hand.n}",
                      "shared loop samples/s": shared.text(), "hand-written samples/s": hand.text(),
                      "shared / hand": intervals.fmt(ratio, 3), "95 % interval (repeats)": interval.text(3),
                      "overhead %": round(cost.pct, 1),
                      "overhead 95 % interval": "[{:+.1f}, {:+.1f}] %".format(*cost.pct_interval),
                      f"against the {harness_basis.GOAL_PCT:g} % goal": cost.verdict,
                      "spread (shared / hand)": f"{spread(mine, 'shared-loop')} / {spread(mine, 'hand-loop')}",
                      "note": cost.note})
    return pd.DataFrame(lines) if lines else None
