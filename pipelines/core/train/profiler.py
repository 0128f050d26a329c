"""One call profiled with torch.profiler: every op's self-CPU share, the compiled-mode events' shares, and the
table a person reads.

The shares are the comparable numbers (a source printed the tables of an older PyTorch on another CPU);
the times are this machine's. Two users: the profiling technique file, whose whole measurement is a profile
(chapters 1 and 3), and `ProfileAfterTraining`, a hook a training technique adds so that its timing entry
also records the profile the source printed beside its times (chapter 3's forward-pass tables, chapter 4's
training profiles), after the timed steps, with the clock stopped.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

from pipelines.core.train.loop import Hooks, Trainable

COMPILED_EVENTS = ("CompiledFunction", "CompiledFunctionBackward")


def profile_call(call: Callable[[], object], top: int, cuda: bool) -> tuple[dict[str, Any], str]:
    """Profile one call: the self-CPU share of every op (`op_share_pct`, by today's profiler names), the
    compiled-mode events' shares (CPU time including children, over the total), and the table of the `top`
    ops."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        call()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)
    shares = {e.key: round(100.0 * e.self_cpu_time_total / total, 2) for e in ranked}
    metrics: dict[str, Any] = {"self_cpu_total_ms": total / 1e3, "op_share_pct": shares}
    for name in COMPILED_EVENTS:
        inside = sum(e.cpu_time_total for e in events if e.key == name)
        metrics[f"share_{name}_pct"] = round(100.0 * inside / total, 2)
    return metrics, events.table(sort_by="self_cpu_time_total", row_limit=top)


class ProfileAfterTraining(Hooks):
    """When training ends (the clock stopped, before evaluation): `call(x, y)` on the first training batch,
    profiled into the record's metrics (`op_share_pct`, which the report's profile-share section judges) and
    artifacts (`profile_table`). `forward_pass` makes the call a forward pass through the module the step
    trains (a compiled one reuses its warm training graph), with autograd on as a source's
    `model(input_sample)`: no weight changes. A training step as the call trains one step more, which the
    technique says in its record's notes."""

    def __init__(self, call: Callable[[torch.Tensor, torch.Tensor], object], device: torch.device, top: int = 20):
        self.call, self.device, self.top = call, device, top
        self.loaders = None

    @classmethod
    def forward_pass(cls, module: Callable[[torch.Tensor], object], device: torch.device) -> "ProfileAfterTraining":
        return cls(lambda x, _: module(x), device)

    def train_start(self, trainable: Trainable, loaders) -> int | None:
        self.loaders = loaders
        return None

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        x, y = next(iter(self.loaders.train))
        x, y = x.to(self.device), y.to(self.device)
        metrics, table = profile_call(lambda: self.call(x, y), self.top, x.is_cuda)
        trainable.metrics.update(metrics)
        trainable.artifacts["profile_table"] = table
