"""Gradient accumulation (lecture note, exercise 2): an effective batch of 256 from 64 x 4 micro-batches.

Each loop step is one micro-batch. Its loss is divided by `accum_steps`, so the gradients summed over
`accum_steps` micro-batches equal the gradient of the mean loss over the whole effective batch. The
optimizer (and, for fp16, the GradScaler) steps and the gradients are zeroed only on every
`accum_steps`-th micro-batch. `accum_steps=1` is the plain step at the full batch: the baseline the
accumulated run must match. Activation memory follows the micro-batch; the optimizer sees the
effective batch. Throughput is counted in samples, so the two arms compare directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import click
import torch
import torch.nn.functional as F

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Needs, Trainable, TrainingPipeline
from pipelines.core.train.steps import DTYPES


@dataclass(frozen=True)
class Options:
    accum_steps: Annotated[int, click.IntRange(min=1)] = 4  # micro-batches per optimizer step
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"


def make_step(model, optimizer, device: torch.device, accum_steps: int, precision: str = "fp32"):
    dtype = DTYPES[precision]
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    micro_batches = 0

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        nonlocal micro_batches
        with torch.autocast(device.type, dtype=dtype, enabled=precision != "fp32"):
            loss = F.cross_entropy(model(x), y) / accum_steps
        scaler.scale(loss).backward()  # gradients add up in .grad across micro-batches
        micro_batches += 1
        if micro_batches % accum_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        return loss.detach() * accum_steps  # the micro-batch's own mean loss, for logging

    return step


class GradientAccumulation(TrainingPipeline[Options]):
    Options = Options
    smoke_settings = {"batch_size": 16}

    needs = (Needs("fp16 autocast + GradScaler is measured on CUDA only", when={"precision": "fp16"}, device="cuda"),)

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        notes = [f"effective batch {cfg.batch_size * opts.accum_steps} = micro-batch {cfg.batch_size} x "
                 f"{opts.accum_steps} steps"]
        return Trainable(model, make_step(model, optimizer, ctx.device, opts.accum_steps, opts.precision),
                         notes=notes)


PIPELINE = GradientAccumulation()
