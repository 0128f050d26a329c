"""Batch-size finder (course unit 9.5): the largest batch that fits, the throughput at each size, then
training at the size it picked (the course's point: a bigger batch that fits trains faster).

Power scaling, as Lightning's `Tuner.scale_batch_size(mode="power")`: start at `start` and double.
Each size trains `steps_per_trial` + 1 real steps (forward, loss, backward, optimizer step; the first
is a warm-up) on batches of that size drawn from the training data, and records samples/s, the median
step time, the peak memory and the last loss: the curve. A size does not fit when CUDA runs out of
memory, or when the peak memory passes `memory_cap_mib` (0 = no cap on CUDA; on CPU, where running out
of memory kills the process instead of raising, 0 means half of this machine's memory). A size whose
predicted peak (the last peak plus twice its growth) is over the cap is not tried.

The last size that fitted is chosen. With `train_after` (default), a fresh model then trains at that
size through the shared loop (the run's steps, or epochs at book scale) and is evaluated, so the
record's throughput and accuracy are those of training at the chosen size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

import click
import torch
from torch.utils.data import DataLoader, RandomSampler

from pipelines.core.data import datasets
from pipelines.core.train import evaluation, loop, memory, microbench, models
from pipelines.core.harness.pipeline import ConfigError, Measured, Measurement
from pipelines.core.train.steps import book_optimizer, plain_step

SMOKE_TRIALS = 3  # smoke scale proves the path: sizes start, 2x, 4x
AT_LEAST_1 = click.IntRange(min=1)


@dataclass(frozen=True)
class Options:
    start: Annotated[int, AT_LEAST_1] = 2
    max_trials: Annotated[int, AT_LEAST_1] = 25
    steps_per_trial: Annotated[int, AT_LEAST_1] = 3
    memory_cap_mib: Annotated[int, click.IntRange(min=0)] = 0  # 0: no cap on CUDA, half the host on CPU
    train_after: bool = True  # train at the chosen size through the shared loop, then evaluate


def memory_cap(opts: Options, device: torch.device) -> float | None:
    if opts.memory_cap_mib:
        return float(opts.memory_cap_mib)
    return None if device.type == "cuda" else memory.total_host_mib() / 2


def trial_batches(dataset, size: int, count: int, seed: int, device: torch.device) -> list[tuple]:
    """`count` batches of `size` samples drawn from the training data (with replacement, so a size larger
    than the dataset still gets full batches), already on the device: the trial times steps, not loading."""
    sampler = RandomSampler(dataset, replacement=True, num_samples=size * count,
                            generator=torch.Generator().manual_seed(seed))
    return [(x.to(device), y.to(device)) for x, y in DataLoader(dataset, batch_size=size, sampler=sampler)]


class BatchSizeFinder(Measurement[Options]):
    Options = Options
    smoke_settings = {"model": "vit_tiny", "num_workers": 0}

    def measure(self, cfg, ctx, loaders) -> Measured:
        opts: Options = cfg.options
        metrics, artifacts = search(cfg, opts, ctx.device, loaders.train.dataset)
        if opts.train_after:
            metrics.update(train_at(dataclasses.replace(cfg, batch_size=metrics["chosen_batch_size"]), ctx))
        else:
            metrics["throughput_samples_per_s"] = metrics["search_throughput_samples_per_s"]
        return Measured(metrics, artifacts)


def search(cfg, opts: Options, device: torch.device, dataset) -> tuple[dict, dict]:
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
            batches = trial_batches(dataset, size, opts.steps_per_trial + 1, cfg.seed or 0, device)
            result = microbench.time_steps(step, batches, device)
        except torch.cuda.OutOfMemoryError:
            result = None
        batches = None
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
               "search_throughput_samples_per_s": best["throughput_samples_per_s"],
               "search_step_time_ms_median": best["step_time_ms_median"], "memory_cap_mib": cap,
               "trials": len(curve), "parameters": models.parameter_count(model),
               "best_throughput_batch_size": max(fitted, key=lambda p: p["throughput_samples_per_s"])["batch_size"]}
    shape = list(dataset[0][0].shape)
    return metrics, {"curve": curve, "input_shape": shape}


def train_at(cfg, ctx) -> dict:
    """A fresh model trained at cfg.batch_size by the shared loop, then evaluated (rank 0)."""
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
    trainable = loop.Trainable(model, plain_step(model, book_optimizer(model, cfg)))
    loaders = datasets.loaders(cfg, datasets.input_shape(cfg), rank=ctx.rank, world_size=ctx.world_size)
    metrics = loop.train(trainable, loaders, cfg, ctx)
    if ctx.is_main:
        metrics.update(evaluation.evaluate(trainable, loaders.test, cfg, ctx))
    return metrics


PIPELINE = BatchSizeFinder()
