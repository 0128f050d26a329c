"""The plain training step every technique starts from, and the book's optimizer.

Pipelines that study a different step (mixed precision, accumulation, ...) write their own in the
pipeline file; this one is the baseline they are compared against.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipelines.core.config import RunConfig
from pipelines.core.loop import Step


def book_optimizer(model: nn.Module, cfg: RunConfig) -> torch.optim.Optimizer:
    """Adam with the book's weight decay; the learning rate comes from the catalog (as coded)."""
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def plain_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> Step:
    """forward, loss, zero_grad, backward, step: the book's order."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step
