"""The training loader's sampler: whose part of the data a run trains on, in which order, and where a resumed
run picks up inside an epoch.

Every training loader gets a `ResumableSampler` around the sampler the source used (torch's RandomSampler
for `shuffle`, a SubsetRandomSampler over the book's or the talk's part, a DistributedSampler over ranks), so
the order of every epoch is the source's, and a checkpoint taken inside an epoch can be resumed there
without loading the batches before it, at the same world size or another:

- `sequence()` is the current epoch's *sequence*: every rank's samples in the order the ranks train them
  together (batch j of every rank before batch j+1 of any), as dataset indices. Under a DistributedSampler
  it is the sampler's padded permutation (rank r takes every world-th sample from r), so the first k
  batches of every rank are its first k x batch x world samples;
- `consumed(batches, batch_size)` is how many samples of the sequence the ranks trained once this rank
  trained `batches` batches of the epoch;
- `resume(sequence, consumed, batch_size)` makes the next iteration train the rest of a kept sequence, this
  rank taking every world-th sample of it: at the world size that kept it, exactly the samples the run
  would have trained; at another, the same samples shared out again, none skipped and none twice (the rest
  padded, as DistributedSampler pads, so that every rank trains as many batches);
- `generator` is the inner sampler's own random generator, if it has one, whose state a checkpoint keeps
  so the epochs after a resume draw the orders they would have drawn.
"""

from __future__ import annotations

import copy
from typing import Iterator, Sequence

import torch
from torch.utils.data import Dataset, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.data import splits
from pipelines.core.data.splits import book_fmnist_train_indices


class ResumableSampler(Sampler[int]):
    """`inner`'s indices (through `indices`, when the inner sampler draws positions of a subset), one epoch at
    a time; an epoch after `resume` continues a kept sequence instead."""

    def __init__(self, inner, indices: Sequence[int] | None = None):
        self.inner, self.indices = inner, indices
        self.rank, self.world = getattr(inner, "rank", 0), getattr(inner, "num_replicas", 1)
        self._order: list[int] = []  # this rank's samples of the current epoch
        self._sequence: list[int] | None = None  # the current epoch's, when it continues a kept one
        self._began = (0, 0)  # (samples of the sequence trained, this rank's batch index) where the epoch began
        self._resume: tuple[list[int], int, int] | None = None

    @property
    def generator(self) -> torch.Generator | None:
        return getattr(self.inner, "generator", None)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)

    def _mapped(self, positions: list[int]) -> list[int]:
        return positions if self.indices is None else [self.indices[i] for i in positions]

    def sequence(self) -> list[int]:
        """The current epoch's sequence (all ranks' samples, in the order they train them together)."""
        if self._sequence is not None:
            return self._sequence
        if self.world == 1:
            return self._order
        whole = copy.copy(self.inner)  # one replica over the same padded length: the permutation itself
        whole.rank, whole.num_replicas, whole.num_samples = 0, 1, self.world * len(self.inner)
        positions = list(whole)
        if len(positions) != self.world * len(self.inner):
            raise ValueError(f"{type(self.inner).__name__} gave {len(positions)} samples as one replica, not "
                             f"{self.world} x {len(self.inner)}: its padding is not DistributedSampler's")
        return self._mapped(positions)

    def consumed(self, batches: int, batch_size: int) -> int:
        """Samples of `sequence()` the ranks trained once this rank trained `batches` batches of the epoch."""
        samples, first = self._began
        return samples + (batches - first) * batch_size * self.world

    def resume(self, sequence: Sequence[int], consumed: int, batch_size: int) -> int:
        """The next iteration trains this rank's share of `sequence` after its first `consumed` samples. Returns
        the batch index the epoch goes on at: the batches a rank of this world size would have trained."""
        rest = list(sequence[consumed:])
        pad = -len(rest) % self.world
        rest += (rest * (pad // max(len(rest), 1) + 1))[:pad]
        first = consumed // (batch_size * self.world)
        self._resume = (list(sequence[:consumed]) + rest, consumed, first)
        return first

    def __iter__(self) -> Iterator[int]:
        if self._resume is not None:
            self._sequence, consumed, first = self._resume
            self._order, self._began, self._resume = self._sequence[consumed + self.rank::self.world], \
                (consumed, first), None
        else:
            self._order, self._sequence, self._began = self._mapped(list(self.inner)), None, (0, 0)
        return iter(self._order)

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
