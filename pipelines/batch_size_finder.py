"""Batch-size finder (course unit 9.5): the largest batch that fits, and the throughput at each size.

Power scaling, as Lightning's `Tuner.scale_batch_size(mode="power")`: start at `start` and double.
Each size runs `steps_per_trial` real training steps (forward, loss, backward, optimizer step) on
random inputs of the data's shape, since memory depends on shapes, not values. A size does not fit
when CUDA runs out of memory, or when the peak memory passes `memory_cap_mib` (0 = no cap on CUDA; on
CPU, where running out of memory kills the process instead of raising, 0 means half of this machine's
memory). A size whose predicted peak (the last peak plus twice its growth) is over the cap is not
tried. The last size that fitted is chosen; the curve of samples/s per size is the artifact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import click
import torch

from pipelines.core import memory, microbench, models
from pipelines.core.errors import ConfigError
from pipelines.core.pipeline import Measured, Measurement
from pipelines.core.steps import book_optimizer, plain_step

SMOKE_TRIALS = 3  # smoke scale proves the path: sizes start, 2x, 4x
AT_LEAST_1 = click.IntRange(min=1)


@dataclass(frozen=True)
class Options:
    start: Annotated[int, AT_LEAST_1] = 2
    max_trials: Annotated[int, AT_LEAST_1] = 25
    steps_per_trial: Annotated[int, AT_LEAST_1] = 3
    memory_cap_mib: Annotated[int, click.IntRange(min=0)] = 0  # 0: no cap on CUDA, half the host on CPU


def memory_cap(opts: Options, device: torch.device) -> float | None:
    if opts.memory_cap_mib:
        return float(opts.memory_cap_mib)
    return None if device.type == "cuda" else memory.total_host_mib() / 2


class BatchSizeFinder(Measurement):
    Options = Options
    smoke_settings = {"model": "vit_tiny", "num_workers": 0}

    def measure(self, cfg, opts: Options, ctx, loaders) -> Measured:
        return Measured(*search(cfg, opts, ctx.device, tuple(next(iter(loaders.train))[0].shape[1:])))


def search(cfg, opts: Options, device: torch.device, shape: tuple[int, ...]) -> tuple[dict, dict]:
    """Double the batch from `start` until it does not fit; (metrics, {"curve", "input_shape"})."""
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(device)
    step = plain_step(model, book_optimizer(model, cfg))
    cap = memory_cap(opts, device)
    trials = min(opts.max_trials, SMOKE_TRIALS) if cfg.scale == "smoke" else opts.max_trials
    curve: list[dict] = []
    size, last_peak, growth = opts.start, None, 0.0
    for _ in range(trials):
        if cap is not None and last_peak is not None and last_peak + 2 * growth > cap:
            curve.append({"batch_size": size, "fits": False,
                          "why": f"predicted peak {last_peak + 2 * growth:.0f} MiB is over the cap"})
            break
        try:
            result = microbench.time_steps(step, shape, size, cfg.head_classes, opts.steps_per_trial, device)
        except torch.cuda.OutOfMemoryError:
            result = None
        if result is None:
            torch.cuda.empty_cache()
            curve.append({"batch_size": size, "fits": False, "why": "CUDA out of memory"})
            break
        fits = cap is None or result["peak_mib"] <= cap
        growth = result["peak_mib"] - last_peak if last_peak is not None else 0.0
        last_peak = result["peak_mib"]
        curve.append({"batch_size": size, "fits": fits, **result} if fits else
                     {"batch_size": size, "fits": False, "why": f"peak {last_peak:.0f} MiB is over the cap",
                      **result})
        if not fits:
            break
        size *= 2
    fitted = [point for point in curve if point["fits"]]
    if not fitted:
        raise ConfigError(f"batch size {opts.start} does not fit ({curve[0]['why']}); lower -o start or "
                          f"raise -o memory_cap_mib (cap {cap} MiB)")
    failed = [point["batch_size"] for point in curve if not point["fits"]]
    best = fitted[-1]
    metrics = {"chosen_batch_size": best["batch_size"],
               "first_failed_batch_size": failed[0] if failed else None,
               "throughput_samples_per_s": best["throughput_samples_per_s"],
               "step_time_ms_median": best["step_time_ms_median"], "memory_cap_mib": cap,
               "trials": len(curve), "parameters": models.parameter_count(model)}
    return metrics, {"curve": curve, "input_shape": list(shape)}


PIPELINE = BatchSizeFinder()
