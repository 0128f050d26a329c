"""Datasets and loaders: torchvision's dataset classes over checked files on disk, or in-memory synthetic.

The files are parsed only by `datafiles.load_split` (format and label checks, a pickle reader that
runs no code); torchvision's classes get the arrays, so item access and transforms stay theirs.

`loaders(cfg)` never falls back: a missing or damaged dataset is an error that names the command
that fixes it, and the returned `Loaders.source` (real | generated | synthetic) goes into the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler, TensorDataset
from torchvision import transforms
from torchvision.datasets import CIFAR10, FashionMNIST, VisionDataset

from pipelines.core import datafiles
from pipelines.core.config import RunConfig

BOOK_FMNIST_SPLIT_SEED = 42  # the book's numpy permutation that keeps 90 % of the train images
BOOK_FMNIST_TRAIN_FRACTION = 0.9


@dataclass
class Loaders:
    train: DataLoader
    test: DataLoader
    source: str  # real | generated | synthetic
    train_samples: int
    test_samples: int


class CheckedFashionMNIST(FashionMNIST):
    """torchvision's FashionMNIST (item access, classes, transforms) over arrays from the checked reader.

    Its own constructor would parse the files itself, or load a `processed/*.pt` cache instead when
    one exists; here the model sees only bytes that passed the checks `accel data verify` runs.
    """

    def __init__(self, root: Path, train: bool, transform: Callable | None = None):
        VisionDataset.__init__(self, str(root), transform=transform)
        self.train = train
        split = datafiles.load_split("fashion_mnist", root, train)
        self.data, self.targets = torch.from_numpy(split.images), torch.from_numpy(split.labels)


class CheckedCIFAR10(CIFAR10):
    """torchvision's CIFAR10 over arrays from the checked reader: its constructor would `pickle.load`
    the batch files, which runs whatever code a hostile file names."""

    def __init__(self, root: Path, train: bool, transform: Callable | None = None):
        VisionDataset.__init__(self, str(root), transform=transform)
        self.train = train
        split = datafiles.load_split("cifar10", root, train)
        self.data, self.targets = split.images, split.labels.tolist()
        self.classes = split.classes
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}


DATASETS = {"fashion_mnist": CheckedFashionMNIST, "cifar10": CheckedCIFAR10}


def default_transform(cfg: RunConfig) -> Callable:
    """ToTensor only, as the book; a Resize first when the config asks for another image size."""
    steps = [transforms.ToTensor()]
    if cfg.image_size:
        steps.insert(0, transforms.Resize((cfg.image_size, cfg.image_size)))
    return transforms.Compose(steps)


def synthetic(cfg: RunConfig, input_shape: tuple[int, ...], classes: int) -> tuple[Dataset, Dataset]:
    """Random tensors in memory, for pure throughput work: no files, no decoding, no learning signal."""
    generator = torch.Generator().manual_seed(cfg.seed or 0)
    steps = (cfg.steps or 20) + cfg.warmup_steps
    count = min(cfg.batch_size * max(steps, 1), 4096)
    count = max(count, cfg.batch_size)

    def make(n: int) -> TensorDataset:
        return TensorDataset(torch.rand((n, *input_shape), generator=generator),
                             torch.randint(0, classes, (n,), generator=generator))

    return make(count), make(max(cfg.batch_size, 256))


def loaders(cfg: RunConfig, input_shape: tuple[int, ...], classes: int = 10,
            train_transform: Callable | None = None, test_transform: Callable | None = None,
            rank: int = 0, world_size: int = 1) -> Loaders:
    if cfg.dataset == "synthetic":
        train_set, test_set = synthetic(cfg, input_shape, classes)
        data_source = "synthetic"
    else:
        data_source = datafiles.source(cfg.dataset, cfg.data_root)  # digests: runner preflight
        transform, dataset = default_transform(cfg), DATASETS[cfg.dataset]
        train_set = dataset(cfg.data_root, True, train_transform or transform)
        test_set = dataset(cfg.data_root, False, test_transform or transform)
    sampler, shuffle, train_samples = _train_sampling(cfg, train_set, rank, world_size)
    common = dict(num_workers=cfg.num_workers, pin_memory=cfg.pin_memory)
    if cfg.num_workers > 0:
        common.update(persistent_workers=cfg.persistent_workers, prefetch_factor=cfg.prefetch_factor)
    train = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler, shuffle=shuffle,
                       drop_last=cfg.drop_last, **common)
    test = DataLoader(test_set, batch_size=cfg.batch_size, shuffle=False, **common)
    return Loaders(train, test, data_source, train_samples, len(test_set))


def _train_sampling(cfg: RunConfig, train_set: Dataset, rank: int, world_size: int):
    """The book's Fashion-MNIST split (90 % of train, numpy seed 42), a DistributedSampler for ranks."""
    generator = torch.Generator().manual_seed(cfg.seed) if cfg.seed is not None else None
    indices = None
    if cfg.dataset == "fashion_mnist":
        order = np.random.RandomState(BOOK_FMNIST_SPLIT_SEED).permutation(len(train_set))
        indices = order[: int(len(train_set) * BOOK_FMNIST_TRAIN_FRACTION)].tolist()
    if world_size > 1:
        from torch.utils.data.distributed import DistributedSampler

        subset = train_set if indices is None else torch.utils.data.Subset(train_set, indices)
        sampler = DistributedSampler(subset, num_replicas=world_size, rank=rank,
                                     shuffle=cfg.shuffle, seed=cfg.seed or 0)
        return _IndexedSampler(sampler, indices), False, len(subset)
    if indices is not None:
        return SubsetRandomSampler(indices, generator=generator), False, len(indices)
    return None, cfg.shuffle, len(train_set)


class _IndexedSampler(torch.utils.data.Sampler):
    """A DistributedSampler over a subset, yielding indices of the full dataset; keeps set_epoch."""

    def __init__(self, inner, indices):
        self.inner, self.indices = inner, indices

    def set_epoch(self, epoch: int) -> None:
        self.inner.set_epoch(epoch)

    def __iter__(self):
        for i in self.inner:
            yield i if self.indices is None else self.indices[i]

    def __len__(self) -> int:
        return len(self.inner)
