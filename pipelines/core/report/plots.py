"""Report plots (PNG), drawn so that what they show is what the numbers support. `all_plots` writes every
figure a report holds:

- speed-up bars per experiment family: published vs reproduced, band and 95 % interval (report/speedup_plots.py);
- accuracy vs speed-up, one panel per reference arm (report/tradeoff_plots.py);
- scaling curves (threads, ranks, GPUs) beside the published curve and ideal scaling (report/scaling_plots.py).

What the figures share (canvas, saving, colours, the speed-ups they plot) is in report/figures.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.core.report.scaling_plots import scaling
from pipelines.core.report.speedup_plots import speedup_bars
from pipelines.core.report.tradeoff_plots import tradeoff
from pipelines.core.stats.rows import Row


def all_plots(rows: list[Row], records: list[dict[str, Any]], out_dir: Path) -> list[tuple[Path, str]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return speedup_bars(rows, out_dir) + tradeoff(rows, out_dir) + scaling(records, out_dir)
