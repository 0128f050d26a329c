"""The training loader's sampler: whose part of the data a run trains on, in which order, and where a resumed
run picks up inside an epoch.

Every training loader gets a `ResumableSampler` around the sampler the source used (torch's RandomSampler
for `shuffle`, a SubsetRandomSampler over the book's or the talk's part, a DistributedSampler over ranks), so
the order of every epoch is the source's, and a checkpoint taken after batch k of an epoch can be resumed at
batch k without loading the k batches before it:

- `order()` is the current epoch's order, drawn when the epoch's iteration started;
- `fast_forward(batches, batch_size, order)` makes the next iteration start `batches` batches in, over
  `order` (the order a checkpoint kept) or, where the inner sampler is deterministic per epoch (a
  DistributedSampler after `set_epoch`), over its own order again;
- `generator` is the inner sampler's own random generator, if it has one, whose state a checkpoint keeps
  so the epochs after a resume draw the orders they would have drawn.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch.utils.data import Dataset, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.data import splits
from pipelines.core.data.splits import book_fmnist_train_indices


class ResumableSampler(Sampler[int]):
    """`inner`'s indices (through `indices`, when the inner sampler draws positions of a subset), one epoch's
    order at a time, optionally starting some batches into the epoch (`fast_forward`)."""

    def __init__(self, inner, indices: Sequence[int] | None = None):
        self.inner, self.indices = inner, indices
        self._order: list[int] = []
        self._start, self._resume_order = 0, None

    @property
    def deterministic(self) -> bool:
        """Whether the inner sampler's order is a function of its epoch (a DistributedSampler): then a resume
        needs no kept order."""
        return hasattr(self.inner, "set_epoch")

    @property
    def generator(self) -> torch.Generator | None:
        return getattr(self.inner, "generator", None)

    def set_epoch(self, epoch: int) -> None:
        if self.deterministic:
            self.inner.set_epoch(epoch)

    def fast_forward(self, batches: int, batch_size: int, order: Sequence[int] | None = None) -> None:
        """The next iteration starts after `batches` batches of `order` (default: the inner sampler's)."""
        self._start, self._resume_order = batches * batch_size, None if order is None else list(order)

    def order(self) -> list[int]:
        return self._order

    def __iter__(self) -> Iterator[int]:
        if self._resume_order is not None:
            self._order = self._resume_order
        else:
            positions = list(self.inner)
            self._order = positions if self.indices is None else [self.indices[i] for i in positions]
        start, self._start, self._resume_order = self._start, 0, None
        return iter(self._order[start:])

    def __len__(self) -> int:
        return len(self.inner)


def train_sampling(cfg: RunConfig, train_set: Dataset, rank: int, world_size: int,
                   holdout: splits.Holdout | None = None) -> tuple[ResumableSampler, int]:
    """The training part's sampler and its size: the book's Fashion-MNIST split (90 % of train, numpy seed
    42), the talk's first 90 % (SubsetRandomSampler, as local_utilities), or the whole set (torch's
    RandomSampler when shuffled, as DataLoader's `shuffle=True` builds it); a DistributedSampler over that
    part for ranks."""
    generator = torch.Generator().manual_seed(cfg.seed) if cfg.seed is not None else None
    indices = None
    if cfg.dataset == "fashion_mnist":
        indices = book_fmnist_train_indices(len(train_set))
    elif holdout is not None:
        indices = list(holdout.train)
    if world_size > 1:
        from torch.utils.data.distributed import DistributedSampler

        size = len(train_set) if indices is None else len(indices)
        sampler = DistributedSampler(range(size), num_replicas=world_size, rank=rank, shuffle=cfg.shuffle,
                                     seed=cfg.seed or 0)
        return ResumableSampler(sampler, indices), size
    if indices is not None and holdout is not None and not cfg.shuffle:
        return ResumableSampler(indices), len(indices)  # the held-out split in file order
    if indices is not None:
        return ResumableSampler(SubsetRandomSampler(indices, generator=generator)), len(indices)
    inner = RandomSampler(train_set) if cfg.shuffle else SequentialSampler(train_set)
    return ResumableSampler(inner), len(train_set)
