"""The FLOPs of one training step, counted on the eager model (torch.utils.flop_counter).

The loop (train/loop.py) counts them once, on the first batch, with the clock stopped; the record's
`flops_per_step` and `achieved_tflops` come from this count.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def count_flops(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int | None:
    """Forward + backward FLOPs of one batch through the eager model (torch.utils.flop_counter)."""
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() or None
