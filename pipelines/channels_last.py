"""Memory format (lecture note): channels_last instead of the default NCHW layout.

channels_last=true puts the model's weights and every input batch in the NHWC memory format, the
layout cuDNN's Tensor Core convolutions and oneDNN's CPU convolutions prefer; the model's code does
not change, only `.to(memory_format=...)` on the model and `.contiguous(memory_format=...)` on the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Trainable, TrainingPipeline
from pipelines.core.train.steps import autocast_forward, book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    channels_last: bool = False


class ChannelsLast(TrainingPipeline[Options]):
    Options = Options
    smoke_settings = {"batch_size": 16}

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        layout = torch.channels_last if opts.channels_last else torch.contiguous_format
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights)
        model = model.to(ctx.device, memory_format=layout)
        to_layout = lambda x: x.contiguous(memory_format=layout)  # noqa: E731
        step = plain_step(model, book_optimizer(model, cfg), prepare=to_layout)
        return Trainable(model, step, predict=autocast_forward(model, prepare=to_layout))


PIPELINE = ChannelsLast()
