"""The plain training loop, for techniques that are settings rather than code.

The book's chapter 2 (bias on/off, batch size: the application layer; the OpenMP runtime: the environment
layer), chapter 4's OpenMP and allocator entries, chapter 9's thread sweep (Table 9.1), the course's
bag-of-words baseline and the note's DataLoader settings all train the model as it is; what differs is in
the catalog's settings and knobs:

- `bias` removes the bias of all four layers; `batch_size` changes the steps per epoch.
- `threads` sets torch's intra-op threads for the arm's process (a process option: arms with different
  counts never share a process); 0 keeps the launcher's.
- The Intel OpenMP and allocator variants are the same code started by `launch/local.sh` with
  OMP_RUNTIME=intel or ALLOCATOR=..., preloaded before Python starts; the run refuses to start if the
  runtime that actually loaded is not the one the experiment asks for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import click

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    bias: bool = True  # False removes the bias of all four layers (ch2-nobias)
    threads: Annotated[int, click.IntRange(min=0)] = 0  # intra-op threads (Table 9.1); 0: the launcher's


class PlainTraining(TrainingPipeline[Options]):
    Options = Options
    process_options = ("threads",)  # the engine sets torch's intra-op threads for the arm's process

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights, bias=opts.bias)
        model = model.to(ctx.device)
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)))


PIPELINE = PlainTraining()
