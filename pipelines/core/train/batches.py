"""The loop's stream of training batches: endless epochs, each announced to the hooks, reshuffled by the
sampler's `set_epoch`, and each batch tagged with its epoch, whether it ends the epoch and its position.

A resumed run starts inside an epoch (`skip` batches of `start_epoch` were trained before the checkpoint):
the training loader's sampler was fast-forwarded past them by the checkpoint hook (data/sampling.py), and
that epoch's iterator is made with the random states put back afterwards. The interrupted run drew its
loader's seeds at the epoch's start, before the checkpoint's random state was taken, so a resume that drew
them again would shift every draw after it (dropout, a transform in this process) away from the run it
continues.
"""

from __future__ import annotations

import random
from typing import Any, Iterator, NamedTuple

import numpy as np
import torch


class Batch(NamedTuple):
    epoch: int
    last: bool  # the epoch's last batch
    index: int  # batches of this epoch before it (skipped ones included)
    data: Any


def _random_states() -> tuple[Any, Any, Any]:
    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def _put_back(states: tuple[Any, Any, Any]) -> None:
    torch.set_rng_state(states[0])
    np.random.set_state(states[1])
    random.setstate(states[2])


def stream(loader, hooks, start_epoch: int, skip: int = 0) -> Iterator[Batch]:
    """Endless batches from `start_epoch` on, the first epoch `skip` batches in."""
    epoch = start_epoch
    while True:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for hook in hooks:
            hook.epoch_start(epoch)
        states = _random_states() if skip else None
        iterator = iter(loader)
        pending = next(iterator, None)
        if states is not None:
            _put_back(states)
        if pending is None:
            if skip:
                raise ValueError(f"the training loader has no batches after the {skip} a checkpoint skips")
            raise ValueError("the training loader is empty: the dataset has fewer samples than one batch")
        index = skip
        while pending is not None:
            following = next(iterator, None)
            yield Batch(epoch, following is None, index, pending)
            pending, index = following, index + 1
        epoch, skip = epoch + 1, 0
