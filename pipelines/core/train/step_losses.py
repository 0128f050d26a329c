"""The per-step losses of a run: kept on the device, brought to the host once per epoch, binned for the record.

The loop (train/loop.py) keeps every step's detached loss on the device, so a step adds no synchronization;
`to_host` moves an epoch's losses in one copy after the clock synchronized anyway, and `loss_curve` bins the
whole run's to at most LOSS_CURVE_POINTS means (`metrics.loss_curve` in the record).
"""

from __future__ import annotations

import math

import numpy as np
import torch

LOSS_CURVE_POINTS = 200  # a loss curve's resolution in the record: enough for a plot, small in JSON


def to_host(losses: list[torch.Tensor]) -> torch.Tensor:
    """Stack device losses into one float64 host tensor and empty the list."""
    out = torch.stack(losses).double().cpu() if losses else torch.zeros(0, dtype=torch.float64)
    losses.clear()
    return out


def loss_curve(losses: np.ndarray, points: int = LOSS_CURVE_POINTS) -> dict[str, list]:
    """Per-step losses as at most `points` bins: `step` is each bin's last step (1-based, warm-up
    included), `loss` the bin's mean (None where a loss was not finite: results hold finite numbers)."""
    if not len(losses):
        return {"step": [], "loss": []}
    bins = np.array_split(np.arange(1, len(losses) + 1), min(points, len(losses)))
    means = [losses[b - 1].mean() for b in bins]
    return {"step": [int(b[-1]) for b in bins],
            "loss": [float(f"{m:.6g}") if math.isfinite(m) else None for m in means]}
