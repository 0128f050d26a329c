"""What every report figure shares: its own Agg canvas, saving, the colours, and the speed-ups it plots.

Figures are `matplotlib.figure.Figure` objects rendered by the Agg canvas (no pyplot, no global state). Each
figure is built by a function that returns it (the tests inspect legends, bars and limits) and saved by
`save`; legends sit outside the axes, in a margin the constrained layout sizes for them. A published speed-up
and a measured one are read off a row the same way in every figure (`published_speedup`, `measured_speedup`).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pipelines.core.stats import pairing
from pipelines.core.stats.rows import Row

PUBLISHED, MEASURED, BAND = "#9e9e9e", "#1f77b4", "#2ca02c"
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")  # one per arm in a panel (matplotlib's tab10)


def figure(width: float, height: float) -> Figure:
    """A figure on its own Agg canvas (no pyplot): it can be drawn and measured as well as saved."""
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path) -> None:
    """bbox_inches='tight' as a safety net: should an artist (a legend, a long tick label) still reach past
    the figure's edge, the saved image grows to include it instead of cutting it off."""
    fig.savefig(path, bbox_inches="tight", pad_inches=0.05)


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
