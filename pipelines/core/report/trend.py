"""trend.html: one static, offline page of every arm's throughput over its runs (`accel report --out`).

One small chart per arm and scale: every run a point (the median of its repeats), its fingerprint in the
point's tooltip (SVG <title>: torch, CPU, host, threads, OpenMP, commit, image, noisy), noisy runs drawn
hollow, and the change points stats/changes.py finds drawn as dashed lines with the shift. Plain inline
SVG and CSS, no script and no network at view time, so the file opens anywhere, air-gapped clusters
included, and a browser test can count the points.
"""

from __future__ import annotations

import html
import importlib.util
from typing import Any, Iterable

from pipelines.core.record import history
from pipelines.core.stats import changes

METRIC = "throughput_samples_per_s"
WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 640, 220, 70, 20, 20, 40
FINGERPRINT_KEYS = ("torch", "cpu", "host", "threads", "openmp", "git", "image")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 15px; margin: 24px 0 4px; }
p.note { color: #555; font-size: 13px; max-width: 820px; }
svg { background: #fafafa; border: 1px solid #ddd; }
.axis { stroke: #888; stroke-width: 1; } .grid { stroke: #e4e4e4; stroke-width: 1; }
.label { font-size: 11px; fill: #555; }
.line { fill: none; stroke: #1f77b4; stroke-width: 1.5; }
circle.run { fill: #1f77b4; stroke: #1f77b4; stroke-width: 1.5; }
circle.run.noisy { fill: #fff; }
circle.run:hover { r: 7; }
line.change-point { stroke: #d62728; stroke-width: 1.5; stroke-dasharray: 5 4; }
text.change { font-size: 11px; fill: #d62728; }
"""


def _tooltip(point: changes.RunPoint) -> str:
    finger = point.fingerprint
    lines = [f"run {point.run_id}", f"{point.value:.4g} samples/s (median of {point.repeats} repeat(s))"]
    lines += [f"{key}: {finger.get(key)}" for key in FINGERPRINT_KEYS if finger.get(key) not in (None, "")]
    if point.noisy:
        lines.append("noisy: " + "; ".join(finger.get("noisy_reasons") or ["see the record"]))
    return "\n".join(lines)


def chart(points: list[changes.RunPoint], found: list[changes.Change]) -> str:
    """One arm's SVG: x = run order (labelled with the run's date, or with its day and UTC time where runs of one
    day would share a label), y = samples/s from zero."""
    top = max(p.value for p in points) * 1.1
    inner_w, inner_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    x = lambda i: PAD_L + (inner_w * (i + 0.5) / len(points))  # noqa: E731
    y = lambda v: PAD_T + inner_h * (1 - v / top)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img">']
    for k in range(5):
        value = top * k / 4
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{y(value):.1f}" y2="{y(value):.1f}"/>')
        parts.append(f'<text class="label" x="{PAD_L - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.4g}</text>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L}" y1="{PAD_T}" y2="{HEIGHT - PAD_B}"/>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{HEIGHT - PAD_B}" y2="{HEIGHT - PAD_B}"/>')
    step = max(1, -(-len(points) * 80 // inner_w))  # date labels at least 80 px apart
    shown = range(0, len(points), step)
    one_day = len({points[i].run_id[:8] for i in shown}) < len(shown)  # runs of one day: their times tell them apart
    for i in shown:
        stamp = points[i].run_id  # 20261127T110911Z-...
        label = (f"{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}" if one_day else
                 f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}")
        parts.append(f'<text class="label" x="{x(i):.1f}" y="{HEIGHT - PAD_B + 16}" text-anchor="middle">'
                     f'{label}</text>')
    parts.append(f'<text class="label" x="{PAD_L + inner_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                 f'runs, oldest first{" (UTC)" if one_day else ""}</text>')
    path = " ".join(f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(points))
    parts.append(f'<polyline class="line" points="{path}"/>')
    for c in found:
        cx = (x(c.index - 1) + x(c.index)) / 2
        parts.append(f'<line class="change-point" data-index="{c.index}" x1="{cx:.1f}" x2="{cx:.1f}" '
                     f'y1="{PAD_T}" y2="{HEIGHT - PAD_B}"><title>change point: {c.percent:+.1f} % '
                     f'({c.before:.4g} -> {c.after:.4g} samples/s)</title></line>')
        parts.append(f'<text class="change" x="{cx + 4:.1f}" y="{PAD_T + 12}">{c.percent:+.1f} %</text>')
    for i, p in enumerate(points):
        kind = "run noisy" if p.noisy else "run"
        parts.append(f'<circle class="{kind}" data-run="{html.escape(p.run_id)}" cx="{x(i):.1f}" '
                     f'cy="{y(p.value):.1f}" r="4.5"><title>{html.escape(_tooltip(p))}</title></circle>')
    parts.append("</svg>")
    return "\n".join(parts)


def page(records: Iterable[dict[str, Any]]) -> str:
    """The whole trend page for these records (ok repeats only; one point per run and arm)."""
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("status") == "ok":
            by_experiment.setdefault(rec["experiment"], []).append(history.as_repeat(rec))
    can_find = importlib.util.find_spec("ruptures") is not None
    body = ["<h1>Throughput over runs</h1>",
            '<p class="note">Every run is a point: the median samples/s of its repeats. Hover a point for its '
            "fingerprint (torch, CPU, host, threads, OpenMP runtime, commit, image). Hollow points ran on a noisy "
            "machine. Dashed red lines are change points: shifts larger than run-to-run noise (ruptures' PELT, "
            "confirmed by Welch's t-test at p &lt; 0.01; `accel history ID` prints the same).</p>"]
    if not can_find:
        body.append('<p class="note">Change points are not drawn: ruptures is not installed here (make venv '
                    "installs it).</p>")
    charts = 0
    for experiment in sorted(by_experiment):
        for (variant, scale), points in sorted(changes.series(by_experiment[experiment], METRIC).items()):
            found = changes.change_points([p.value for p in points]) if can_find else []
            body.append(f"<h2>{html.escape(experiment)} [{html.escape(variant)}] ({html.escape(scale)}): "
                        f"{len(points)} run(s)</h2>")
            body.append(chart(points, found))
            charts += 1
    if not charts:
        body.append('<p class="note">No successful runs to draw.</p>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>accel: throughput over runs"
            f"</title><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
