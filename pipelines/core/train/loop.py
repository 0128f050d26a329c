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
- Evaluation runs with the clock stopped; it never leaks into training time. A source's own per-epoch
  validation pass is another thing: a Hooks' `epoch_end`, which the loop calls inside the timed window, as
  the source's clock held it (core/train/bookkeeping.py); `epoch_times_s` end before the hooks run.
- Losses stay on the device until an epoch ends, so the loop adds no hidden synchronization.
- Every measured step's time is kept (`step_times_s`), so a report can put an interval on a ratio.
- Every step's loss is kept on the device too (no synchronization per step) and leaves it once per
  epoch; the record carries it binned to at most LOSS_CURVE_POINTS means (`loss_curve`).
- `Hooks.step_end` runs after the step's clock stopped: progress bars count there, outside step times.
- Page faults (getrusage) are counted over the timed windows and reported per step: glibc returning
  freed buffers to the OS and faulting them in again is most of a CPU step's spread (docs/timing.md).
- With `pause_collector` (bench scale) Python's cyclic collector runs before a timed window, never in it.
- The loop's state lives in `Training`, so one arm can run in blocks between other arms' blocks
  (train/interleave.py): same steps, same clocks, `train_s` summed over the arm's own windows.

Per-technique callbacks (an lr scheduler, FSDP's final gather) and the runner's (checkpoints) are one
mechanism: `Hooks` objects, the Trainable's first, then the runner's, called in that order.

Over 300 lines on purpose: it is the one loop, and its timing rules (clocks, windows, warm-up, page faults,
the collector, the record's metrics) are checked by reading them together; split, a rule would sit apart
from the steps it governs.
"""

from __future__ import annotations

import gc
import math
import random
import resource
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from pipelines.core.train import clocks, interrupt, memory
from pipelines.core.train.clocks import now
from pipelines.core.config.runconfig import RunConfig

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


def page_faults() -> tuple[int, int]:
    """(minor, major) page faults of this process so far (getrusage): glibc handing freed activation
    buffers back to the OS and faulting them in again is the main source of step-time spread on a CPU."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


FAULT_BURST = 1000  # minor faults in one block, and 10x the arm's median block, make a burst


def fault_bursts(blocks: Sequence[Sequence[float]]) -> list[int]:
    """The rounds of the blocks whose minor page faults burst: at least FAULT_BURST and 10 times the arm's
    median block. With the allocator pinned a block faults a few pages; a burst (the heap grown or trimmed,
    thousands of pages faulted in again, up to about 1 % of a 0.5 s block) is flagged, never dropped."""
    if not blocks:
        return []
    typical = statistics.median(b[3] for b in blocks)
    return [int(b[0]) for b in blocks if b[3] >= max(FAULT_BURST, 10 * typical)]


@contextmanager
def collector_paused(paused: bool = True) -> Iterator[None]:
    """Python's cyclic garbage collector off for a timed window (a collection inside it is seconds of
    another arm's garbage, billed to this step); it runs, untimed, before the window opens."""
    if not paused:
        yield
        return
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Training:
    """One arm's training, resumable: the loop's state between calls, so that arms of one process can be
    measured in interleaved blocks (train/interleave.py) with the same clocks and bookkeeping as a whole
    run (`train`). Step kinds: "warmup" (timed apart), "discard" (the first step after a switch of arms:
    run, not counted), "timed" (kept in `step_times_s`). `train_s` is the wall time of the timed windows
    only, so another arm's blocks between them never count."""

    def __init__(self, trainable: Trainable, loaders, cfg: RunConfig, ctx: RunContext,
                 hooks: Sequence[Hooks] = (), start_epoch: int = 0):
        self.trainable, self.loaders, self.cfg, self.ctx = trainable, loaders, cfg, ctx
        self.hooks = [*trainable.hooks, *hooks]
        self.device = ctx.device
        trainable.model.train()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.offset = start_epoch
        starts = [hook.train_start(trainable, loaders) for hook in self.hooks]  # every hook sees the start
        resumed = next((epoch for epoch in starts if epoch is not None), None)
        if resumed is not None:  # resuming: the epoch budget counts from 0, not from the resumed epoch
            start_epoch, self.offset = resumed, 0
        self.start_epoch = start_epoch
        self.stream = _batches(loaders.train, self.hooks, start_epoch)
        self.clock = clocks.for_device(self.device)
        self.marks: list[tuple[Any, Any, Any, str, int]] = []  # (start, on device, end, kind, samples), unread
        self.step_times: list[float] = []
        self.warmup_times: list[float] = []
        self.data_wait = self.compute = self.warmup_s = self.switch_s = self.train_s = 0.0
        self.samples = 0  # samples of the timed steps, as loaded: a last partial batch counts what it holds
        self.faults = [0, 0]  # minor, major page faults inside timed windows
        self.blocks: list[list[float]] = []  # interleaved: [round, steps, seconds, minor, major] per block
        self.gc_paused = False
        self.discarded = 0  # steps run after a switch of arms and not counted
        self.flops: int | None = None
        self.epoch_times: list[float] = []
        self.epoch_losses: list[float] = []
        self.step_losses: list[torch.Tensor] = []  # this epoch's, still on the device
        self.loss_chunks: list[torch.Tensor] = []  # earlier epochs', on the host
        self.done = 0
        self.loss: torch.Tensor | None = None
        self.epoch, self.last_in_epoch = start_epoch, False
        self.window_started: float | None = None
        self.epoch_started = now(self.device)
        # between interleaved blocks (train/interleave.py): the block's size, and this arm's own random state
        # (taken here, after its seeding and building), so its draws never depend on the arm before it:
        # torch's generators, and Python's and NumPy's global ones (a transform or a sampler may draw from them)
        self.block_steps = 1
        self.rng: torch.Tensor = torch.random.get_rng_state()
        self.cuda_rng: list[torch.Tensor] | None = None
        self.host_rng: tuple[Any, Any] = (random.getstate(), np.random.get_state())

    def settle(self) -> None:
        """Wait for the device once and turn this window's marks into seconds."""
        if not self.marks:
            return
        clock = self.clock
        clock.settle()
        for start, on_device, end, kind, samples in self.marks:
            if kind == "timed":
                self.samples += samples
                self.step_times.append(clock.seconds(start, end))
                self.data_wait += clock.seconds(start, on_device)
                self.compute += clock.seconds(on_device, end)
            elif kind == "warmup":
                self.warmup_times.append(clock.seconds(start, end))
                self.warmup_s += self.warmup_times[-1]
            else:
                self.switch_s += clock.seconds(start, end)
        self.marks.clear()

    def step(self, kind: str = "timed") -> None:
        """One step. Per-step work is kept to what the record needs (three clock marks, one detached loss,
        the hooks): no synchronization, no host copy."""
        interrupt.check()  # a safe point: a noted signal ends the run here, between steps
        mark, device, non_blocking = self.clock.mark, self.device, self.cfg.pin_memory
        t0 = mark()
        epoch, last_in_epoch, (x, y) = next(self.stream)
        x = x.to(device, non_blocking=non_blocking)
        y = y.to(device, non_blocking=non_blocking)
        if self.done == 0 and self.trainable.count_flops and self.ctx.is_main:
            self.flops = count_flops(self.trainable, x, y)
            self.epoch_started = now(device)  # the count is not a training step
            if self.window_started is not None:
                self.window_started = self.epoch_started
            t0 = mark()
        t1 = mark()
        loss = self.trainable.step(x, y)
        t2 = mark()
        self.done += 1
        kept = loss.detach()
        self.step_losses.append(kept if kept.dim() == 0 else kept.reshape(()))
        self.marks.append((t0, t1, t2, kind, len(y) if y.dim() else 1))
        if len(self.marks) >= SETTLE_EVERY:
            self.settle()
        for hook in self.hooks:
            hook.step_end(self.done)
        self.loss, self.epoch, self.last_in_epoch = loss, epoch, last_in_epoch
        if last_in_epoch:
            self.settle()
            self.epoch_times.append(now(device) - self.epoch_started)
            self.epoch_losses.append(float(loss.detach()))
            self.loss_chunks.append(_to_host(self.step_losses))  # the clock synchronized already
            for hook in self.hooks:
                hook.epoch_end(epoch, self.epoch_losses[-1])
            self.epoch_started = now(device)

    def open_window(self) -> None:
        self.settle()
        self.window_started = now(self.device)
        self._faults_at = page_faults()

    def close_window(self) -> float:
        """End a timed window: its wall time (device synchronized) and page faults join the totals."""
        self.settle()
        seconds = now(self.device) - self.window_started
        minor, major = page_faults()
        faults = (minor - self._faults_at[0], major - self._faults_at[1])
        self.faults[0] += faults[0]
        self.faults[1] += faults[1]
        self.train_s += seconds
        self.window_started = None
        self._last_window = (seconds, *faults)
        return seconds

    def warm_up(self, steps: int | None = None) -> None:
        """The warm-up steps (compilation, allocator growth, cache fills), timed apart."""
        for _ in range(self.cfg.warmup_steps if steps is None else steps):
            self.step("warmup")
        self.settle()

    def block(self, steps: int, index: int, discard: int = 1) -> None:
        """One interleaved block: `discard` steps after the switch of arms (cold caches, another arm's
        allocator state), then `steps` timed steps in one window, the collector paused inside it."""
        for _ in range(discard):
            self.step("discard")
        self.discarded += discard
        with collector_paused():
            self.gc_paused = True
            self.open_window()
            before = self.samples
            for _ in range(steps):
                self.step("timed")
            seconds, minor, major = self.close_window(), *self._last_window[1:]
        self.blocks.append([index, steps, round(seconds, 7), minor, major, 0, self.samples - before])

    def train(self, pause_collector: bool = False) -> dict[str, Any]:
        """The whole run: warm-up, then timed steps until the step budget or the epochs are done."""
        cfg = self.cfg
        total = cfg.warmup_steps + cfg.steps if cfg.steps else None
        while self.done < cfg.warmup_steps and not self._finished(total):
            self.step("warmup")
        with collector_paused(pause_collector):
            self.gc_paused = pause_collector
            self.open_window()
            while not self._finished(total):
                self.step("timed")
            self.close_window()
        return self.finish()

    def _finished(self, total: int | None) -> bool:
        if total is not None:
            return self.done >= total
        return self.last_in_epoch and self.epoch + 1 - self.offset >= self.cfg.epochs

    def finish(self, shared: bool = False) -> dict[str, Any]:
        """The record's metrics. `shared`: other arms ran between this arm's blocks, so epoch wall times and
        the process's memory peak are not this arm's and are left out. Blocks, when the arm ran any, are kept
        with their switch time and dropped steps."""
        self.settle()
        cfg, ctx, step_times, train_s = self.cfg, self.ctx, self.step_times, self.train_s
        self.loss_chunks.append(_to_host(self.step_losses))
        for hook in self.hooks:
            hook.train_end(self.trainable, self.epoch + 1 if self.last_in_epoch else self.epoch)
        final_loss = float(self.loss.detach())
        flops, measured = self.flops, len(step_times)
        epoch_times = [] if shared else self.epoch_times
        metrics = {
            "warmup_s": self.warmup_s,
            "warmup_steps": min(self.done, cfg.warmup_steps),
            "train_s": train_s,
            "measured_steps": measured,
            "step_times_s": [round(s, 7) for s in step_times],
            # the mean samples of a timed step (a last partial batch holds fewer), times the ranks
            "samples_per_step": (self.samples / measured if measured else cfg.batch_size) * ctx.world_size,
            "step_time_ms_median": statistics.median(step_times) * 1e3 if step_times else None,
            "step_time_ms_p90": percentile(step_times, 90) * 1e3 if step_times else None,
            "data_wait_s": self.data_wait,
            "compute_s": self.compute,
            "throughput_samples_per_s": self.samples * ctx.world_size / train_s if step_times and train_s > 0 else None,
            "final_loss": final_loss if math.isfinite(final_loss) else None,
            "epochs_completed": len(self.epoch_times),
            "epoch_times_s": epoch_times,
            "epoch_last_loss": self.epoch_losses,
            "loss_curve": loss_curve(torch.cat(self.loss_chunks).numpy()),
            "first_epoch_s": epoch_times[0] if epoch_times else None,
            "median_epoch_s": statistics.median(epoch_times[1:]) if len(epoch_times) > 1 else None,
            "flops_per_step": flops,
            "achieved_tflops": flops * measured * ctx.world_size / train_s / 1e12
            if flops and step_times and train_s > 0 else None,
            "page_faults_minor_per_step": self.faults[0] / measured if measured else None,
            "page_faults_major_per_step": self.faults[1] / measured if measured else None,
            "gc_paused_in_timed_steps": self.gc_paused,
        }
        if self.blocks:
            metrics.update(blocks=self.blocks, switch_s=self.switch_s, discarded_steps=self.discarded,
                           block_steps=self.block_steps, recompiled_blocks=[b[0] for b in self.blocks if b[5]],
                           fault_burst_blocks=fault_bursts(self.blocks))
        if not shared:
            metrics.update(memory.process_peaks(self.device))
        if self.start_epoch:  # resumed from a checkpoint: epochs before this one ran in an earlier process
            metrics["start_epoch"] = self.start_epoch
        return metrics


def train(trainable: Trainable, loaders, cfg: RunConfig, ctx: RunContext, hooks: Sequence[Hooks] = (),
          start_epoch: int = 0, pause_collector: bool = False) -> dict[str, Any]:
    """The whole run of one arm (warm-up, then the timed steps or epochs): `Training(...).train()`."""
    return Training(trainable, loaders, cfg, ctx, hooks, start_epoch).train(pause_collector)


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
            interrupt.check()
            if cfg.eval_batches is not None and index >= cfg.eval_batches:
                break
            logits = predict(x.to(ctx.device))
            correct += int((logits.argmax(dim=1).cpu() == y).sum())
            seen += len(y)
    model.train()
    return {"test_accuracy_pct": 100.0 * correct / seen if seen else None, "test_samples": seen,
            "eval_s": time.perf_counter() - started}
