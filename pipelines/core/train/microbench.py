"""Short timed runs outside the training loop (one trial of a batch-size search, a run of predictions).

Same clock rules as the loop: the device is synchronized before each clock read, warm-up calls are
timed apart, and the peak memory is read after the calls (see core.memory).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from pipelines.core.train import memory
from pipelines.core.train.clocks import now
from pipelines.core.train.loop import Step


@dataclass
class Timed:
    warmup_s: float
    times_s: list[float]  # one per timed call
    outputs: list  # what each timed call returned (e.g. logits, a loss)


def time_calls(call: Callable, inputs: Sequence, device: torch.device, warmup: int) -> Timed:
    """call(*item) for each item of `inputs`; the first `warmup` calls are timed apart from the rest."""
    warmup_s, times, outputs = 0.0, [], []
    for index, item in enumerate(inputs):
        started = now(device)
        out = call(*item)
        elapsed = now(device) - started
        if index < warmup:
            warmup_s += elapsed
        else:
            times.append(elapsed)
            outputs.append(out)
    return Timed(warmup_s, times, outputs)


def time_steps(step: Step, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], device: torch.device) -> dict:
    """Train on `batches`: the first step is a warm-up, the rest are timed; samples/s, median step, peak memory."""
    memory.reset_peak(device)
    timed = time_calls(step, batches, device, warmup=1)
    median = statistics.median(timed.times_s)
    size = len(batches[0][1])
    return {"throughput_samples_per_s": size / median, "step_time_ms_median": median * 1e3,
            "peak_mib": memory.peak_mib(device), "last_loss": float(timed.outputs[-1].detach())}
