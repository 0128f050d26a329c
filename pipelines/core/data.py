"""Datasets and loaders: torchvision's real dataset classes over files on disk, or in-memory synthetic.

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


def _torchvision_dataset(name: str, root: Path, train: bool, transform: Callable) -> Dataset:
    import torchvision

    if name == "fashion_mnist":
        return torchvision.datasets.FashionMNIST(str(root), train=train, transform=transform)
    cls = torchvision.datasets.CIFAR10
    if datafiles.source(name, root) == "generated":
        cls = _cifar_with_manifest_checksums(root)
    return cls(str(root), train=train, transform=transform)


def _cifar_with_manifest_checksums(root: Path) -> type:
    """torchvision's CIFAR10 reader, unchanged, told to expect our recorded MD5s instead of the real ones."""
    import hashlib

    import torchvision

    folder = Path(root) / datafiles.spec("cifar10").folder

    def md5(name: str) -> str:
        return hashlib.md5((folder / name).read_bytes()).hexdigest()

    base = torchvision.datasets.CIFAR10
    return type("GeneratedCIFAR10", (base,), {
        "train_list": [[n, md5(n)] for n, _ in base.train_list],
        "test_list": [[n, md5(n)] for n, _ in base.test_list],
        "meta": {**base.meta, "md5": md5(base.meta["filename"])},
    })


def default_transform(cfg: RunConfig) -> Callable:
    """ToTensor only, as the book; a Resize first when the config asks for another image size."""
    from torchvision import transforms

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
        data_source = datafiles.source(cfg.dataset, cfg.data_root)  # checksums: runner preflight
        transform = default_transform(cfg)
        train_set = _torchvision_dataset(cfg.dataset, cfg.data_root, True, train_transform or transform)
        test_set = _torchvision_dataset(cfg.dataset, cfg.data_root, False, test_transform or transform)
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
