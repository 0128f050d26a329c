"""The FLOPs of one training step, counted on the eager model (torch.utils.flop_counter).

The loop (train/loop.py) counts them once, on the first batch, with the clock stopped; the record's
`flops_per_step` and `achieved_tflops` come from this count.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def count_flops(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int | None:
    """Forward + backward FLOPs of one batch through the eager model (torch.utils.flop_counter), leaving the
    run as it found it: the buffers a forward updates (batch norm's running statistics) and the random
    state (dropout's draws) are put back, so the count changes neither the training nor a resumed run's
    match with the run it continues (it counts again after a resume)."""
    buffers = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []), \
            FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for buffer, kept in buffers:
            buffer.copy_(kept)
    return counter.get_total_flops() or None
