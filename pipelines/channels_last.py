"""Memory format and input pipeline: channels_last, and the lecture note's DataLoader settings.

- channels_last=true: the model's weights and every input batch use the NHWC memory format, the
  layout cuDNN's Tensor Core convolutions and oneDNN's CPU convolutions prefer; the model's code does
  not change, only `.to(memory_format=...)` on the model and the batch.
- The loader settings (num_workers, pin_memory, prefetch_factor, persistent_workers, shuffle) are
  RunConfig fields the catalog sets per variant; the loop copies pinned batches with
  non_blocking=True. Pinned memory only speeds host-to-GPU copies: on CPU the record says so.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipelines.core import loop, models
from pipelines.core.steps import book_optimizer

OPTIONS = {"channels_last": False}
SMOKE_ARGS = {"batch_size": 16}


def setup(cfg, ctx) -> loop.Trainable:
    layout = torch.channels_last if cfg.options["channels_last"] else torch.contiguous_format
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights)
    model = model.to(ctx.device, memory_format=layout)
    optimizer = book_optimizer(model, cfg)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(model(x.contiguous(memory_format=layout)), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    notes = []
    if cfg.pin_memory and ctx.device.type != "cuda":
        notes.append("pin_memory=true has no effect without a GPU: pinned pages only speed host-to-GPU "
                     "copies")
    predict = lambda x: model(x.contiguous(memory_format=layout))  # noqa: E731
    return loop.Trainable(model, step, predict=predict, notes=notes)
