"""The plain training step every technique starts from, the book's optimizer, and the dtype table.

Pipelines whose technique IS the step (mixed precision with a GradScaler, gradient accumulation) write
their own step in the pipeline file, so the technique stays visible there; this one is the baseline
they are compared against. `dtype` runs forward and loss under autocast (the loss stays fp32), and
`prepare` changes each input batch (e.g. to channels_last) before the model sees it.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train.loop import Hooks, Step, Trainable

Observe = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]  # (logits, y, loss) after the step

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # precision name -> dtype


def book_optimizer(model: nn.Module, cfg: RunConfig) -> torch.optim.Optimizer:
    """Adam with the book's weight decay; the learning rate comes from the catalog (as coded)."""
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def autocast_forward(model: Callable, dtype: torch.dtype | None = None,
                     prepare: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Callable:
    """model(x), under autocast to `dtype` when it is a low-precision type, on prepared inputs."""
    def forward(x: torch.Tensor) -> torch.Tensor:
        x = prepare(x) if prepare else x
        with torch.autocast(x.device.type, dtype=dtype or torch.float32,
                            enabled=dtype not in (None, torch.float32)):
            return model(x)

    return forward


def plain_step(model: Callable, optimizer: torch.optim.Optimizer, dtype: torch.dtype | None = None,
               prepare: Callable[[torch.Tensor], torch.Tensor] | None = None, observe: Observe | None = None) -> Step:
    """forward, loss, zero_grad, backward, step: the book's order. `observe(logits, y, loss)` runs after the
    optimizer step, inside the step (the talk's per-batch bookkeeping, core/train/bookkeeping.py)."""
    forward = autocast_forward(model, dtype, prepare)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = forward(x).float()
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if observe is not None:
            observe(logits, y, loss)
        return loss

    return step


def fabric_step(fabric, model, optimizer, observe: Observe | None = None):
    """The talk's Fabric training step: Fabric's backward applies the precision plugin; `observe` as in
    plain_step."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        fabric.backward(loss)
        optimizer.step()
        if observe is not None:
            observe(logits, y, loss)
        return loss

    return step


class StepLrEachEpoch(Hooks):
    """The talk's step 07: the scheduler steps once per finished epoch; the record keeps the last rate."""

    def __init__(self, scheduler):
        self.scheduler = scheduler

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        self.scheduler.step()

    def state_dict(self) -> dict:  # kept in a checkpoint (train/checkpoint.py), so a resume goes on decaying
        return self.scheduler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.scheduler.load_state_dict(state)

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        trainable.metrics["lr_final"] = self.scheduler.get_last_lr()[0]
