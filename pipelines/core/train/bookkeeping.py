"""What a source's own training loop did besides the step, inside its timed region.

The talk's train() (rasbt/cvpr2023 at 854a2b6, scripts 00-07) and the course's Trainer.fit time more than
forward, backward and the optimizer step; their minutes hold this too, so the arms that reproduce them do
it in the same place:

- `ValidationPass` (a Hooks): after every epoch, the model in eval mode and without gradients over the
  split's validation part (`Loaders.valid`: the talk's images 45,000-49,999, the course's 5,000 reviews),
  its accuracy from the argmax of each batch through torchmetrics' Accuracy(task="multiclass"), as both
  sources measured it. The loop calls `epoch_end` inside the timed window, so `train_s` holds every pass
  (the talk's time.time() around train() did); `epoch_times_s` stays the training part and `validation_s`
  says what the passes took. Over ranks each rank runs its share (the same number of batches on every
  rank: a sharded forward is a collective) and torchmetrics' compute() reduces the counts over the ranks,
  as in the talk's 4-GPU runs. Capped at `eval_batches` like the test pass (no cap at book scale). It does
  nothing when the run's split has no validation part.
- `BatchLog` (a Hooks, and the step's observer: the step calls it after optimizer.step()): the talk's
  per-batch bookkeeping. `train_accuracy`: model.eval(), the batch's argmax into a torchmetrics Accuracy
  under no_grad, model.train() (the talk switches back at the next batch's start), computed and reset at
  each epoch's end. `loss_every=N`: on batches 0, N, 2N ... of an epoch the loss is read to the host and
  formatted as the talk's print line (f"... Loss: {loss:.4f}", a device synchronization on a GPU). The line
  goes to the record (`logged_losses`: epoch, batch, loss) instead of stdout, which carries the CLI's own
  output; the read and the formatting, what the print cost inside the clock, are the same.

torchmetrics is Lightning's own dependency (the talk pinned torchmetrics >= 0.11.4); its update checks its
inputs as the talk's did (validate_args, the default).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from pipelines.core.train.loop import Hooks, RunContext, Trainable
from pipelines.core.train.steps import Observe


def accuracy_metric(classes: int, device: torch.device):
    """torchmetrics.Accuracy(task="multiclass", num_classes=classes) on the device, as both sources built it
    (micro average: correct over seen)."""
    import torchmetrics

    return torchmetrics.Accuracy(task="multiclass", num_classes=classes).to(device)


class ValidationPass(Hooks):
    """The per-epoch validation pass over the split's validation part, inside the timed region."""

    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor] | None, classes: int, ctx: RunContext,
                 eval_batches: int | None = None, non_blocking: bool = False):
        """`forward`: what the source called in eval mode (the compiled model, Fabric's or DDP's wrapper);
        None: the Trainable's predict, else its model."""
        self.forward, self.classes, self.ctx = forward, classes, ctx
        self.eval_batches, self.non_blocking = eval_batches, non_blocking
        self.loader = None
        self.model: torch.nn.Module | None = None
        self.accuracy_pct: list[float] = []
        self.seconds: list[float] = []
        self.batches = 0

    def train_start(self, trainable: Trainable, loaders) -> None:
        self.loader = getattr(loaders, "valid", None)
        self.model = trainable.model
        if self.forward is None:
            self.forward = trainable.predict if trainable.predict is not None else trainable.model
        return None

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        if self.loader is None:
            return
        started = time.perf_counter()
        device, metric, batches = self.ctx.device, accuracy_metric(self.classes, self.ctx.device), 0
        self.model.eval()
        with torch.no_grad():
            for index, (x, y) in enumerate(self.loader):
                if self.eval_batches is not None and index >= self.eval_batches:
                    break
                x = x.to(device, non_blocking=self.non_blocking)
                y = y.to(device, non_blocking=self.non_blocking)
                metric.update(torch.argmax(self.forward(x), 1), y)
                batches += 1
        self.accuracy_pct.append(round(100.0 * float(metric.compute()), 4))  # over every rank's share
        self.model.train()
        self.seconds.append(time.perf_counter() - started)
        self.batches = batches

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        if self.loader is None:
            return
        trainable.metrics.update(val_accuracy_pct_per_epoch=self.accuracy_pct, validation_passes=len(self.seconds),
                                 validation_batches_per_pass=self.batches, validation_s=sum(self.seconds),
                                 validation_s_per_epoch=[round(s, 4) for s in self.seconds])


class BatchLog(Hooks):
    """The talk's per-batch bookkeeping: a train accuracy updated from every batch, a loss line every N."""

    def __init__(self, classes: int, ctx: RunContext, epochs: int, train_accuracy: bool = True,
                 loss_every: int = 0):
        self.classes, self.ctx, self.epochs = classes, ctx, epochs
        self.train_accuracy, self.loss_every = train_accuracy, loss_every
        self.metric = None
        self.model: torch.nn.Module | None = None
        self.epoch = self.batch = self.batches = self.updates = 0
        self.accuracy_pct: list[float] = []
        self.logged: list[list[Any]] = []
        self.line = ""

    def train_start(self, trainable: Trainable, loaders) -> None:
        self.model = trainable.model
        self.batches = len(loaders.train)
        if self.train_accuracy:
            self.metric = accuracy_metric(self.classes, self.ctx.device)
        return None

    def epoch_start(self, epoch: int) -> None:
        self.epoch, self.batch = epoch, 0

    def __call__(self, logits: torch.Tensor, targets: torch.Tensor, loss: torch.Tensor) -> None:
        """Inside the step, after optimizer.step(): what the talk's loop did there."""
        if self.loss_every and not self.batch % self.loss_every:
            self.line = (f"Epoch: {self.epoch + 1:04d}/{self.epochs:04d} | Batch {self.batch:04d}/"
                         f"{self.batches:04d} | Loss: {loss:.4f}")  # the host read of the talk's print
            value = float(self.line.rpartition(" ")[2])
            self.logged.append([self.epoch + 1, self.batch, value if math.isfinite(value) else None])
        if self.metric is not None:
            self.model.eval()
            with torch.no_grad():
                self.metric.update(torch.argmax(logits, 1), targets)
            self.model.train()
            self.updates += 1
        self.batch += 1

    def _close_epoch(self) -> None:
        if self.metric is not None and self.updates:
            self.accuracy_pct.append(round(100.0 * float(self.metric.compute()), 4))  # over every rank's share
            self.metric.reset()
            self.updates = 0

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        self._close_epoch()

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        self._close_epoch()  # a step budget that ends inside an epoch: that epoch's share so far
        if self.train_accuracy:
            trainable.metrics["train_accuracy_pct_per_epoch"] = self.accuracy_pct
        if self.loss_every:
            trainable.metrics.update(logged_losses=self.logged, loss_every=self.loss_every)


def source_loop(opts, cfg, ctx: RunContext,
                forward: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[Observe | None, list[Hooks]]:
    """From a pipeline's BookkeepingOptions: the step's observer (None when the talk's per-batch bookkeeping
    is off) and the hooks (the validation pass, which does nothing without a validation part, and the
    batch log), for the pipeline to hand to its step and its Trainable."""
    hooks: list[Hooks] = []
    if opts.validate:
        hooks.append(ValidationPass(forward, cfg.head_classes, ctx, cfg.eval_batches, cfg.pin_memory))
    log = None
    if opts.train_accuracy or opts.loss_every:
        log = BatchLog(cfg.head_classes, ctx, cfg.epochs, opts.train_accuracy, opts.loss_every)
        hooks.append(log)
    return log, hooks
