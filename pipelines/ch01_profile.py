"""Chapter 1: where the time goes in one forward pass of the book's CNN.

torch.profiler over one forward pass of a 64-image batch (no warm-up, as the book), ops sorted by self
CPU time. The shares are the comparable numbers; the times are this machine's. This is a measurement,
not a training run (chapter 1's extra-layer parameter count is `ch01_params.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import click
import torch
from torch.profiler import ProfilerActivity, profile

from pipelines.core import models
from pipelines.core.pipeline import Measured, Measurement

BOOK_OPS = ("aten::mkldnn_convolution", "aten::max_pool2d_with_indices", "aten::addmm", "aten::clamp_min")


@dataclass(frozen=True)
class Options:
    top_ops: Annotated[int, click.IntRange(min=1)] = 20  # rows of the profile table kept in the record


def profile_forward(model: torch.nn.Module, batch: torch.Tensor, top: int) -> tuple[dict, str]:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if batch.is_cuda else [])
    with torch.no_grad(), profile(activities=activities) as prof:
        model(batch)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)
    shares = {e.key: round(100.0 * e.self_cpu_time_total / total, 2) for e in ranked[:top]}
    table = events.table(sort_by="self_cpu_time_total", row_limit=top)
    return {"self_cpu_total_ms": total / 1e3, "op_share_pct": shares}, table


class ProfileForward(Measurement):
    Options = Options

    def measure(self, cfg, opts: Options, ctx, loaders) -> Measured:
        x, _ = next(iter(loaders.train))
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        metrics, table = profile_forward(model, x.to(ctx.device), opts.top_ops)
        for op in BOOK_OPS:
            metrics[f"share_{op.split('::')[1]}_pct"] = metrics["op_share_pct"].get(op, 0.0)
        metrics["parameters"] = models.parameter_count(model)
        return Measured(metrics, {"profile_table": table, "batch_shape": list(x.shape)})


PIPELINE = ProfileForward()
