"""Short timed runs of a step outside the training loop (e.g. one trial of a batch-size search).

Same clock rules as the loop: the device is synchronized before each clock read, the first step is
a warm-up and is not timed, and the peak memory is read after the steps (see core.memory).
"""

from __future__ import annotations

import statistics

import torch

from pipelines.core import memory
from pipelines.core.loop import Step, now


def time_steps(step: Step, shape: tuple[int, ...], batch_size: int, classes: int, steps: int,
               device: torch.device) -> dict:
    """Run 1 warm-up + `steps` timed steps on random inputs; samples/s, median step time, peak memory."""
    x = torch.rand((batch_size, *shape), device=device)
    y = torch.randint(0, classes, (batch_size,), device=device)
    memory.reset_peak(device)
    step(x, y)
    times = []
    for _ in range(steps):
        started = now(device)
        step(x, y)
        times.append(now(device) - started)
    median = statistics.median(times)
    return {"throughput_samples_per_s": batch_size / median, "step_time_ms_median": median * 1e3,
            "peak_mib": memory.peak_mib(device)}
