"""Datasets and loaders: torchvision's dataset classes over checked files on disk, or in-memory synthetic.

The files are parsed only by `datafiles.load_split` (format and label checks, a pickle reader that
runs no code); torchvision's classes get the arrays, so item access and transforms stay theirs.

`loaders(cfg)` never falls back: a missing or damaged dataset is an error that names the command
that fixes it, and the returned `Loaders.source` (real | generated | synthetic) goes into the result.

IMDB is text: its reviews are tokenized once per process (`core/data/text.py`: a local tokenizer folder, or
one trained on the training reviews) into (N, 2, seq_len) tensors of ids and attention masks, which a
TensorDataset serves; `Loaders.details` says which tokenizer, for the record.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler, TensorDataset
from torchvision import transforms
from torchvision.datasets import CIFAR10, FashionMNIST, VisionDataset

from pipelines.core.data import files, text
from pipelines.core.train import models
from pipelines.core.spec.config import RunConfig
from pipelines.core.errors import ConfigError

BOOK_FMNIST_SPLIT_SEED = 42  # the book's numpy permutation that keeps 90 % of the train images
BOOK_FMNIST_VALID_FRACTION = 0.1  # its build_data_loader's valid_size: the permutation's FIRST 10 % (never used)


def book_fmnist_train_indices(train_images: int) -> list[int]:
    """The training images of the book's build_data_loader: np.random.seed(42), shuffle the indices, keep
    `indices[split:]` with split = floor(0.1 * n), the LAST 90 % (54,000 of 60,000); the first 10 % is the
    validation split it never evaluates. Taking the first 90 % instead would train on 6,000 of the book's
    validation images and leave out 6,000 of its training ones."""
    order = np.random.RandomState(BOOK_FMNIST_SPLIT_SEED).permutation(train_images)
    return order[int(np.floor(BOOK_FMNIST_VALID_FRACTION * train_images)):].tolist()


@dataclass
class Loaders:
    train: DataLoader
    test: DataLoader
    source: str  # real | generated | synthetic
    train_samples: int
    test_samples: int
    details: dict = field(default_factory=dict)  # facts about the data for the record (e.g. the tokenizer)


class CheckedFashionMNIST(FashionMNIST):
    """torchvision's FashionMNIST (item access, classes, transforms) over arrays from the checked reader.

    Its own constructor would parse the files itself, or load a `processed/*.pt` cache instead when
    one exists; here the model sees only bytes that passed the checks `accel data verify` runs.
    """

    def __init__(self, root: Path, train: bool, transform: Callable | None = None):
        VisionDataset.__init__(self, str(root), transform=transform)
        self.train = train
        split = files.load_split("fashion_mnist", root, train)
        self.data, self.targets = torch.from_numpy(split.images), torch.from_numpy(split.labels)


class CheckedCIFAR10(CIFAR10):
    """torchvision's CIFAR10 over arrays from the checked reader: its constructor would `pickle.load`
    the batch files, which runs whatever code a hostile file names."""

    def __init__(self, root: Path, train: bool, transform: Callable | None = None):
        VisionDataset.__init__(self, str(root), transform=transform)
        self.train = train
        split = files.load_split("cifar10", root, train)
        self.data, self.targets = split.images, split.labels.tolist()
        self.classes = split.classes
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}


DATASETS = {"fashion_mnist": CheckedFashionMNIST, "cifar10": CheckedCIFAR10}
TEXT_DATASETS = ("imdb",)
IMDB_ORDER_SEED = 0


def check(cfg: RunConfig) -> None:
    """Refuse, before any work, a model that cannot read the dataset (text into a CNN, images into BERT)."""
    takes_tokens = models.spec(cfg.model).takes_tokens
    if cfg.dataset in TEXT_DATASETS and not takes_tokens:
        token_models = ", ".join(n for n, m in models.REGISTRY.items() if m.takes_tokens)
        raise ConfigError(f"dataset {cfg.dataset} is text and model {cfg.model} reads images; pass --model "
                          f"with a token model ({token_models})")
    if takes_tokens and cfg.dataset not in (*TEXT_DATASETS, "synthetic"):
        raise ConfigError(f"model {cfg.model} reads tokens and dataset {cfg.dataset} holds images; pass "
                          f"--dataset {' or '.join(TEXT_DATASETS)} (or synthetic)")
    if cfg.tokenizer is not None and cfg.dataset not in TEXT_DATASETS:
        raise ConfigError(f"--tokenizer applies to text datasets ({', '.join(TEXT_DATASETS)}), not {cfg.dataset}; "
                          "drop it")


@functools.lru_cache(maxsize=4)
def _tokenized_imdb(root: str, stamp: str, tokenizer: str | None, seq_len: int, vocab: int):
    """Both IMDB splits, read by the checked reader and encoded once per process (repeats and variants share
    them); `stamp` (the folder's checksum list) makes a regenerated folder a different entry."""
    train, test = (files.load_split("imdb", Path(root), split) for split in (True, False))
    encoded = text.tokenize_splits(train.texts, test.texts, seq_len, vocab, Path(tokenizer) if tokenizer else None)
    out = []
    for e, split in zip(encoded, (train, test)):
        # The folders list every neg review, then every pos one: a fixed permutation mixes them, so the first
        # batches (a smoke or bench evaluation) hold both classes even without shuffling.
        order = torch.from_numpy(np.random.default_rng(IMDB_ORDER_SEED).permutation(len(split.labels)))
        out.append((TensorDataset(e.inputs[order], torch.from_numpy(split.labels)[order]), e.details))
    return out


def imdb(cfg: RunConfig, input_shape: tuple[int, ...]) -> tuple[Dataset, Dataset, dict]:
    """IMDB as (train, test) TensorDatasets of encoded reviews, and the tokenizer's details."""
    manifest = Path(cfg.data_root) / files.spec("imdb").folder / files.MANIFEST
    stamp = files.digest(manifest) if manifest.is_file() else ""
    (train, details), (test, _) = _tokenized_imdb(str(cfg.data_root), stamp,
                                                  None if cfg.tokenizer is None else str(cfg.tokenizer),
                                                  input_shape[-1], models.spec(cfg.model).vocab_size)
    return train, test, details


def input_shape(cfg: RunConfig) -> tuple[int, ...]:
    """Per-sample input shape: the model's, with the configured image size or sequence length."""
    shape = models.spec(cfg.model).input_shape
    if models.spec(cfg.model).takes_tokens:
        return (shape[0], cfg.seq_len or shape[1])
    channels, height, width = shape
    if cfg.image_size:
        height = width = cfg.image_size
    return (channels, height, width)


def default_transform(cfg: RunConfig) -> Callable:
    """ToTensor only, as the book; a Resize first when the config asks for another image size."""
    steps = [transforms.ToTensor()]
    if cfg.image_size:
        steps.insert(0, transforms.Resize((cfg.image_size, cfg.image_size)))
    return transforms.Compose(steps)


def synthetic(cfg: RunConfig, input_shape: tuple[int, ...], classes: int) -> tuple[Dataset, Dataset]:
    """Random tensors in memory (pixels, or token ids for token models), for pure throughput work: no files,
    no decoding, no learning signal."""
    generator = torch.Generator().manual_seed(cfg.seed or 0)
    steps = (cfg.steps or 20) + cfg.warmup_steps
    count = min(cfg.batch_size * max(steps, 1), 4096)
    count = max(count, cfg.batch_size)

    def make(n: int) -> TensorDataset:
        return TensorDataset(models.random_inputs(cfg.model, n, input_shape, generator),
                             torch.randint(0, classes, (n,), generator=generator))

    return make(count), make(max(cfg.batch_size, 256))


def loaders(cfg: RunConfig, input_shape: tuple[int, ...], classes: int | None = None,
            train_transform: Callable | None = None, test_transform: Callable | None = None,
            rank: int = 0, world_size: int = 1) -> Loaders:
    """`classes`: how many labels synthetic data draws from (default: the model head's, cfg.head_classes)."""
    details = {}
    if cfg.dataset == "synthetic":
        train_set, test_set = synthetic(cfg, input_shape, cfg.head_classes if classes is None else classes)
        data_source = "synthetic"
    elif cfg.dataset in TEXT_DATASETS:
        data_source = files.source(cfg.dataset, cfg.data_root)
        train_set, test_set, details = imdb(cfg, input_shape)
    else:
        data_source = files.source(cfg.dataset, cfg.data_root)  # digests: runner preflight
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
    return Loaders(train, test, data_source, train_samples, len(test_set), details)


def _train_sampling(cfg: RunConfig, train_set: Dataset, rank: int, world_size: int):
    """The book's Fashion-MNIST split (90 % of train, numpy seed 42), a DistributedSampler for ranks."""
    generator = torch.Generator().manual_seed(cfg.seed) if cfg.seed is not None else None
    indices = None
    if cfg.dataset == "fashion_mnist":
        indices = book_fmnist_train_indices(len(train_set))
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
