"""The one training loop. A pipeline hands it a step function; the loop owns clocks and bookkeeping.

Timing rules (why each one exists):
- A step's time is read off the device's own timeline (core.clocks): on a CPU a host clock, on a GPU
  CUDA events recorded on the stream and read once per window (warm-up end, epoch end, every
  SETTLE_EVERY steps, the end). Synchronizing at every step would serialize host and device and remove
  the overlap (the next batch's loading and copy during this step's kernels) that a real loop has;
  on an H100 that cost the ViT-B/16 step 16 % (the harness-overhead measurement, docs/timing.md).
- The measured window's wall time (train_s, the throughput) is a host clock read after synchronizing,
  once when warm-up ends and once at the end.
- Warm-up steps (compilation, allocator growth, cache fills) are timed, but reported apart.
- Data wait (from the step's start until its batch is on the device: the loader's hand-over and the
  copy, as far as they are not hidden behind earlier work) is measured apart from compute.
- Evaluation runs with the clock stopped; it never leaks into training time.
- Losses stay on the device until an epoch ends, so the loop adds no hidden synchronization.
- Every measured step's time is kept (`step_times_s`), so a report can put an interval on a ratio.
- Every step's loss is kept on the device too (no synchronization per step) and leaves it once per
  epoch; the record carries it binned to at most LOSS_CURVE_POINTS means (`loss_curve`).
- `Hooks.step_end` runs after the step's clock stopped: progress bars count there, outside step times.

Per-technique callbacks (an lr scheduler, FSDP's final gather) and the runner's (checkpoints) are one
mechanism: `Hooks` objects, the Trainable's first, then the runner's, called in that order.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from pipelines.core.train import clocks, memory
from pipelines.core.train.clocks import now, synchronize  # noqa: F401  (re-exported: pipelines time windows with them)
from pipelines.core.spec.config import RunConfig

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LOSS_CURVE_POINTS = 200  # a loss curve's resolution in the record: enough for a plot, small in JSON
SETTLE_EVERY = 1000  # steps between reads of a GPU clock's events when no epoch ends (bounds their number)


class Hooks:
    """Callbacks around training; override what you need. Every method is a no-op by default."""

    def train_start(self, trainable: "Trainable", loaders) -> int | None:
        """Return an epoch to resume from (a checkpoint), or None to start at the beginning."""
        return None

    def step_end(self, done: int) -> None:
        """After each step (warm-up included), with the clock stopped; `done` counts this run's steps.
        Called every step: keep it O(1) and free of device synchronization."""

    def epoch_start(self, epoch: int) -> None: ...
    def epoch_end(self, epoch: int, last_loss: float) -> None: ...
    def train_end(self, trainable: "Trainable", epoch: int) -> None: ...


@dataclass
class Trainable:
    """What a pipeline builds: the model (eager, for FLOP counting and evaluation) and its step."""

    model: nn.Module
    step: Step
    predict: Callable[[torch.Tensor], torch.Tensor] | None = None  # defaults to model(x)
    count_flops: bool = True
    notes: list[str] = field(default_factory=list)  # facts the record should carry (e.g. "no effect")
    optimizer: Any = None  # for checkpoints (saved and restored with the model)
    hooks: list[Hooks] = field(default_factory=list)  # the technique's callbacks (scheduler, FSDP gather)
    metrics: dict[str, Any] = field(default_factory=dict)  # technique-specific metrics for the record
    artifacts: dict[str, Any] = field(default_factory=dict)  # files and tables for the record (e.g. an export)


@dataclass
class RunContext:
    device: torch.device
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _batches(loader, hooks: list[Hooks], start_epoch: int) -> Iterator[tuple[int, bool, Any]]:
    """Endless (epoch, is_last_in_epoch, batch) stream; set_epoch reshuffles distributed samplers."""
    epoch = start_epoch
    while True:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for hook in hooks:
            hook.epoch_start(epoch)
        iterator = iter(loader)
        pending = next(iterator, None)
        if pending is None:
            raise ValueError("the training loader is empty: the dataset has fewer samples than one batch")
        while pending is not None:
            following = next(iterator, None)
            yield epoch, following is None, pending
            pending = following
        epoch += 1


def count_flops(trainable: Trainable, x: torch.Tensor, y: torch.Tensor) -> int | None:
    """Forward + backward FLOPs of one batch through the eager model (torch.utils.flop_counter)."""
    model = trainable.model
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() or None


def train(trainable: Trainable, loaders, cfg: RunConfig, ctx: RunContext, hooks: Sequence[Hooks] = (),
          start_epoch: int = 0) -> dict[str, Any]:
    hooks = [*trainable.hooks, *hooks]
    device = ctx.device
    model = trainable.model
    model.train()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    total_steps = cfg.warmup_steps + cfg.steps if cfg.steps else None
    offset = start_epoch
    starts = [hook.train_start(trainable, loaders) for hook in hooks]  # every hook sees the start
    resumed = next((epoch for epoch in starts if epoch is not None), None)
    if resumed is not None:  # resuming: the epoch budget counts from 0, not from the resumed epoch
        start_epoch, offset = resumed, 0
    stream = _batches(loaders.train, hooks, start_epoch)

    flops = None
    clock = clocks.for_device(device)
    marks: list[tuple[Any, Any, Any, bool]] = []  # (start, batch on device, step end, is warm-up), unread
    step_times: list[float] = []
    data_wait = compute = warmup_s = 0.0

    def settle() -> None:
        """Wait for the device once and turn this window's marks into seconds."""
        nonlocal data_wait, compute, warmup_s
        if not marks:
            return
        clock.settle()
        for start, on_device, end, is_warmup in marks:
            if is_warmup:
                warmup_s += clock.seconds(start, end)
            else:
                step_times.append(clock.seconds(start, end))
                data_wait += clock.seconds(start, on_device)
                compute += clock.seconds(on_device, end)
        marks.clear()

    epoch_times: list[float] = []
    epoch_losses: list[float] = []
    step_losses: list[torch.Tensor] = []  # this epoch's, still on the device
    loss_chunks: list[torch.Tensor] = []  # earlier epochs', on the host
    done = 0
    loss = None
    epoch = start_epoch
    # Per-step work is kept to what the record needs (three clock marks, one detached loss, the hooks): the
    # clock's and the frozen config's names are bound once, and a 0-d loss is kept as returned (no extra view).
    mark, warmup, non_blocking = clock.mark, cfg.warmup_steps, cfg.pin_memory
    epoch_started = measured_started = now(device)
    while True:
        t0 = mark()
        epoch, last_in_epoch, (x, y) = next(stream)
        x = x.to(device, non_blocking=non_blocking)
        y = y.to(device, non_blocking=non_blocking)
        if done == 0 and trainable.count_flops and ctx.is_main:
            flops = count_flops(trainable, x, y)
            epoch_started = measured_started = now(device)  # the count is not a training step
            t0 = mark()
        t1 = mark()
        loss = trainable.step(x, y)
        t2 = mark()
        done += 1
        kept = loss.detach()
        step_losses.append(kept if kept.dim() == 0 else kept.reshape(()))
        marks.append((t0, t1, t2, done <= warmup))
        if done == warmup:
            settle()
            measured_started = now(device)
        elif len(marks) >= SETTLE_EVERY:
            settle()
        for hook in hooks:
            hook.step_end(done)
        if last_in_epoch:
            settle()
            epoch_times.append(now(device) - epoch_started)
            epoch_losses.append(float(loss.detach()))
            loss_chunks.append(_to_host(step_losses))  # the clock synchronized already
            for hook in hooks:
                hook.epoch_end(epoch, epoch_losses[-1])
            epoch_started = now(device)
        if total_steps is not None and done >= total_steps:
            break
        if total_steps is None and last_in_epoch and epoch + 1 - offset >= cfg.epochs:
            break
    settle()
    train_s = now(device) - measured_started
    loss_chunks.append(_to_host(step_losses))
    for hook in hooks:
        hook.train_end(trainable, epoch + 1 if last_in_epoch else epoch)
    final_loss = float(loss.detach())
    metrics = {
        "warmup_s": warmup_s,
        "warmup_steps": min(done, cfg.warmup_steps),
        "train_s": train_s,
        "measured_steps": len(step_times),
        "step_times_s": [round(s, 7) for s in step_times],
        "samples_per_step": cfg.batch_size * ctx.world_size,
        "step_time_ms_median": statistics.median(step_times) * 1e3 if step_times else None,
        "step_time_ms_p90": percentile(step_times, 90) * 1e3 if step_times else None,
        "data_wait_s": data_wait,
        "compute_s": compute,
        "throughput_samples_per_s": len(step_times) * cfg.batch_size * ctx.world_size / train_s
        if step_times and train_s > 0 else None,
        "final_loss": final_loss if math.isfinite(final_loss) else None,
        "epochs_completed": len(epoch_times),
        "epoch_times_s": epoch_times,
        "epoch_last_loss": epoch_losses,
        "loss_curve": loss_curve(torch.cat(loss_chunks).numpy()),
        "first_epoch_s": epoch_times[0] if epoch_times else None,
        "median_epoch_s": statistics.median(epoch_times[1:]) if len(epoch_times) > 1 else None,
        "flops_per_step": flops,
        "achieved_tflops": flops * len(step_times) * ctx.world_size / train_s / 1e12
        if flops and step_times and train_s > 0 else None,
    }
    metrics.update(memory.process_peaks(device))
    if start_epoch:  # resumed from a checkpoint: epochs before this one ran in an earlier process
        metrics["start_epoch"] = start_epoch
    return metrics


def _to_host(losses: list[torch.Tensor]) -> torch.Tensor:
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


def evaluate(trainable: Trainable, loader, cfg: RunConfig, ctx: RunContext) -> dict[str, Any]:
    """Test accuracy with the clock stopped, in eval mode (the book skipped model.eval(); we do not)."""
    predict = trainable.predict if trainable.predict is not None else trainable.model
    model = trainable.model
    model.eval()
    correct = seen = 0
    started = time.perf_counter()
    with torch.no_grad():
        for index, (x, y) in enumerate(loader):
            if cfg.eval_batches is not None and index >= cfg.eval_batches:
                break
            logits = predict(x.to(ctx.device))
            correct += int((logits.argmax(dim=1).cpu() == y).sum())
            seen += len(y)
    model.train()
    return {"test_accuracy_pct": 100.0 * correct / seen if seen else None, "test_samples": seen,
            "eval_s": time.perf_counter() - started}
