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
- Evaluation (train/evaluation.py) runs with the clock stopped; it never leaks into training time. A
  source's own per-epoch validation pass is another thing: a Hooks' `epoch_end`, which the loop calls
  inside the timed window, as the source's clock held it (core/train/bookkeeping.py); `epoch_times_s` end
  before the hooks run. An untimed hook (a checkpoint save) pauses the window: `checkpoint_save_s`.
- Losses stay on the device until an epoch ends, so the loop adds no hidden synchronization.
- Every measured step's time is kept (`step_times_s`), so a report can put an interval on a ratio.
- Every step's loss is kept on the device too (no synchronization per step) and leaves it once per
  epoch; the record carries it binned to at most LOSS_CURVE_POINTS means (train/step_losses.py).
- `Hooks.step_end` runs after the step's clock stopped: progress bars count there, outside step times.
- Page faults (getrusage) are counted over the timed windows and reported per step: glibc returning
  freed buffers to the OS and faulting them in again is most of a CPU step's spread (docs/timing.md).
- With `pause_collector` (bench scale) Python's cyclic collector runs before a timed window, never in it
  (both in train/host_noise.py).
- The loop's state lives in `Training`, so one arm can run in blocks between other arms' blocks
  (train/interleave.py): same steps, same clocks, `train_s` summed over the arm's own windows. Its totals
  become the record's metrics in train/record_metrics.py.

Per-technique callbacks (an lr scheduler, FSDP's final gather) and the runner's (checkpoints) are one
mechanism: `Hooks` objects, the Trainable's first, then the runner's, called in that order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from pipelines.core.train import batches, clocks, interrupt
from pipelines.core.train.clocks import now
from pipelines.core.train.flops import count_flops
from pipelines.core.train.host_noise import collector_paused, page_faults
from pipelines.core.train.step_losses import to_host
from pipelines.core.train.record_metrics import arm_metrics
from pipelines.core.config.runconfig import RunConfig

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
SETTLE_EVERY = 1000  # steps between reads of a GPU clock's events when no epoch ends (bounds their number)


class Hooks:
    """Callbacks around training; override what you need. Every method is a no-op by default."""

    timed = True  # False: epoch_end and mid_epoch run with the timed window paused, their time kept apart
    every_steps = 0  # > 0: mid_epoch runs after every that many batches of an epoch (not after its last)
    resume_batches = 0  # set by train_start: batches of the resumed epoch trained before (a mid-epoch checkpoint)

    def train_start(self, trainable: "Trainable", loaders) -> int | None:
        """Return an epoch to resume from (a checkpoint), or None to start at the beginning."""
        return None

    def mid_epoch(self, epoch: int, batches: int) -> None:
        """After `batches` batches of `epoch` (a multiple of every_steps), the clock stopped (a checkpoint)."""

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
        self.start_batch = self.resumed_steps = 0
        if resumed is not None:  # resuming: the epoch or step budget counts from the run's start, not from here
            start_epoch, self.offset = resumed, 0
            self.start_batch = max(hook.resume_batches for hook in self.hooks)
            self.resumed_steps = resumed * (len(loaders.train) if hasattr(loaders.train, "__len__") else 0) + \
                self.start_batch
        self.start_epoch = start_epoch
        self.stream = batches.stream(loaders.train, self.hooks, start_epoch, self.start_batch)
        self.stepping = [hook for hook in self.hooks if hook.every_steps]  # mid_epoch callers
        self.clock = clocks.for_device(self.device)
        self.marks: list[tuple[Any, Any, Any, str, int]] = []  # (start, on device, end, kind, samples), unread
        self.step_times: list[float] = []
        self.warmup_times: list[float] = []
        self.data_wait = self.compute = self.warmup_s = self.switch_s = self.train_s = 0.0
        self.samples = 0  # samples of the timed steps, as loaded: a last partial batch counts what it holds
        self.faults = [0, 0]  # minor, major page faults inside timed windows
        self.blocks: list[list[float]] = []  # interleaved: a row of train/interleave.py BLOCK_COLUMNS per block
        self.cycles_per_period = 1  # of the process's order (stats/orders.py), set by interleave.measure_blocks
        self.gc_paused, self.discarded = False, 0  # discarded: steps run after a switch of arms, not counted
        self.flops: int | None = None
        self.epoch_times, self.epoch_losses = [], []  # finished epochs' wall times and last losses
        self.step_losses: list[torch.Tensor] = []  # this epoch's, still on the device
        self.loss_chunks: list[torch.Tensor] = []  # earlier epochs', on the host
        self.done, self.loss = 0, None  # steps run, and the last one's loss
        self.epoch, self.last_in_epoch = start_epoch, False
        self.window_started: float | None = None
        self.window_paused = self.untimed_s = 0.0  # untimed hooks' seconds: in the open window, and in all
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
        epoch, last_in_epoch, index, (x, y) = next(self.stream)
        x = x.to(device, non_blocking=non_blocking)
        y = y.to(device, non_blocking=non_blocking)
        if self.done == 0 and self.trainable.count_flops and self.ctx.is_main:
            self.flops = count_flops(self.trainable.model, x, y)
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
            self.loss_chunks.append(to_host(self.step_losses))  # the clock synchronized already
            for hook in self.hooks:
                self._call(hook, hook.epoch_end, epoch, self.epoch_losses[-1])
            self.epoch_started = now(device)
        else:
            for hook in (h for h in self.stepping if (index + 1) % h.every_steps == 0):
                self.settle()  # the marks so far, before the window pauses
                self._call(hook, hook.mid_epoch, epoch, index + 1)

    def _call(self, hook: Hooks, method: Callable, *args) -> None:
        """A hook's call at an epoch's end or inside one; an untimed hook's time leaves the timed window."""
        paused = None if hook.timed else now(self.device)  # synchronized (settled) already
        method(*args)
        if paused is not None:
            self.untimed_s += (spent := now(self.device) - paused)
            self.window_paused += spent
            self.epoch_started += spent  # nor from the epoch's wall time

    def open_window(self) -> None:
        self.settle()
        self.window_started, self.window_paused = now(self.device), 0.0
        self._faults_at = page_faults()

    def close_window(self) -> float:
        """End a timed window: its wall time (device synchronized) and page faults join the totals."""
        self.settle()
        seconds = now(self.device) - self.window_started - self.window_paused
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
            return self.done + self.resumed_steps >= total
        return self.last_in_epoch and self.epoch + 1 - self.offset >= self.cfg.epochs

    def finish(self, shared: bool = False) -> dict[str, Any]:
        """The record's metrics (train/record_metrics.py), once the last marks are settled, the losses are on
        the host and the hooks have ended. `shared`: other arms ran between this arm's blocks (`arm_metrics`)."""
        self.settle()
        self.loss_chunks.append(to_host(self.step_losses))
        for hook in self.hooks:
            hook.train_end(self.trainable, self.epoch + 1 if self.last_in_epoch else self.epoch)
        return arm_metrics(self, shared)


def train(trainable: Trainable, loaders, cfg: RunConfig, ctx: RunContext, hooks: Sequence[Hooks] = (),
          start_epoch: int = 0, pause_collector: bool = False) -> dict[str, Any]:
    """The whole run of one arm (warm-up, then the timed steps or epochs): `Training(...).train()`."""
    return Training(trainable, loaders, cfg, ctx, hooks, start_epoch).train(pause_collector)
