"""Datasets and loaders: torchvision's dataset classes over checked files on disk, or in-memory synthetic.

The files are parsed only by `datafiles.load_split` (format and label checks, a pickle reader that
runs no code); torchvision's classes get the arrays, so item access and transforms stay theirs.

`loaders(cfg)` never falls back: a missing or damaged dataset is an error that names the command
that fixes it, and the returned `Loaders.source` (real | generated | synthetic) goes into the result.

IMDB is text: its reviews are tokenized once per process (`core/data/text.py`: a local tokenizer folder, or
one trained on the training reviews) into (N, 2, seq_len) tensors of ids and attention masks, which a
TensorDataset serves; `Loaders.details` says which tokenizer, for the record.

`cfg.split` picks whose split (core/data/splits.py): the dataset's own files, the CVPR 2023 talk's CIFAR-10
holdout (train 0-44,999, validation 45,000-49,999) or the course's pooled IMDB split (35,000 / 5,000 /
10,000). A split with a validation part gives `Loaders.valid`, which the pipelines' per-epoch validation
pass (core/train/bookkeeping.py) runs inside the timed region, as both sources' loops did.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset, SubsetRandomSampler, TensorDataset
from torchvision import transforms
from torchvision.datasets import CIFAR10, FashionMNIST, VisionDataset

from pipelines.core.data import files, sampling, splits, text
from pipelines.core.data.sampling import ResumableSampler
from pipelines.core.data.splits import book_fmnist_train_indices  # noqa: F401  (the book's split, read by tests)
from pipelines.core.train import models
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.errors import ConfigError

@dataclass
class Loaders:
    train: DataLoader
    test: DataLoader
    source: str  # real | generated | synthetic
    train_samples: int
    test_samples: int
    details: dict = field(default_factory=dict)  # facts about the data for the record (e.g. the tokenizer)
    valid: DataLoader | None = None  # the split's validation part (cvpr2023, dlf-imdb), this rank's share
    valid_samples: int = 0  # the validation part's size, all ranks together


def fingerprint(cfg: RunConfig, loaders: Loaders) -> str:
    """What the training data is, for a checkpoint's identity: its source (real, generated, synthetic), the
    training part's size, and the digest of the dataset folder's checksum list where it has one (so
    regenerated or replaced files are another dataset)."""
    stamp = ""
    if cfg.dataset in files.FILES:
        listed = Path(cfg.data_root) / files.spec(cfg.dataset).folder / files.MANIFEST
        stamp = files.digest(listed)[:16] if listed.is_file() else ""
    return f"{loaders.source}:{loaders.train_samples}" + (f":{stamp}" if stamp else "")


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
def _tokenized_imdb(root: str, stamp: str, tokenizer: str | None, seq_len: int, vocab: int, split: str):
    """IMDB's parts as (TensorDataset, details) pairs, read by the checked reader and encoded once per process
    (repeats and variants share them); `stamp` (the folder's checksum list) makes a regenerated folder a
    different entry. split "dataset": (train, test), IMDB's own 25,000 / 25,000; "dlf-imdb": (train, valid,
    test), the course's pooled 35,000 / 5,000 / 10,000. The tokenizer is trained on the training part."""
    train, test = (files.load_split("imdb", Path(root), part) for part in (True, False))
    if split == "dlf-imdb":
        texts, labels = splits.course_pool(train, test)
        cut = splits.course_pool_split(len(labels))
        parts = [([texts[i] for i in positions], labels[positions]) for positions in (cut.train, cut.valid, cut.test)]
        orders = [None] * 3  # the course's own order: its shuffled pool, already mixed
    else:
        parts = [(train.texts, train.labels), (test.texts, test.labels)]
        # The folders list every neg review, then every pos one: a fixed permutation mixes them, so the first
        # batches (a smoke or bench evaluation) hold both classes even without shuffling.
        orders = [np.random.default_rng(IMDB_ORDER_SEED).permutation(len(part[1])) for part in parts]
    encoded = text.tokenize_parts([texts for texts, _ in parts], seq_len, vocab, Path(tokenizer) if tokenizer else None)
    out = []
    for e, (_, labels), order in zip(encoded, parts, orders):
        inputs, targets = e.inputs, torch.from_numpy(np.asarray(labels))
        if order is not None:
            order = torch.from_numpy(order)
            inputs, targets = inputs[order], targets[order]
        out.append((TensorDataset(inputs, targets), e.details))
    return out


def imdb(cfg: RunConfig, input_shape: tuple[int, ...]) -> tuple[Dataset, Dataset | None, Dataset, dict]:
    """IMDB as (train, valid, test) TensorDatasets of encoded reviews (valid None for IMDB's own split), and
    the tokenizer's details."""
    manifest = Path(cfg.data_root) / files.spec("imdb").folder / files.MANIFEST
    stamp = files.digest(manifest) if manifest.is_file() else ""
    parts = _tokenized_imdb(str(cfg.data_root), stamp, None if cfg.tokenizer is None else str(cfg.tokenizer),
                            input_shape[-1], models.spec(cfg.model).vocab_size, cfg.split)
    details = parts[0][1]
    if len(parts) == 3:
        return parts[0][0], parts[1][0], parts[2][0], details
    return parts[0][0], None, parts[1][0], details


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
    valid_set = None
    if cfg.dataset == "synthetic":
        train_set, test_set = synthetic(cfg, input_shape, cfg.head_classes if classes is None else classes)
        data_source = "synthetic"
        if cfg.split == "dlf-imdb":  # the course's pooled split, on the pooled tensors (test first, as it read)
            train_set, valid_set, test_set = _pooled_parts(ConcatDataset([test_set, train_set]))
    elif cfg.dataset in TEXT_DATASETS:
        data_source = files.source(cfg.dataset, cfg.data_root)
        train_set, valid_set, test_set, details = imdb(cfg, input_shape)
    else:
        data_source = files.source(cfg.dataset, cfg.data_root)  # digests: runner preflight
        transform, dataset = default_transform(cfg), DATASETS[cfg.dataset]
        train_set = dataset(cfg.data_root, True, train_transform or transform)
        test_set = dataset(cfg.data_root, False, test_transform or transform)
    holdout = splits.talk_holdout(len(train_set)) if cfg.split == "cvpr2023" else None
    sampler, train_samples = sampling.train_sampling(cfg, train_set, rank, world_size, holdout)
    common = dict(num_workers=cfg.num_workers, pin_memory=cfg.pin_memory)
    if cfg.num_workers > 0:
        common.update(persistent_workers=cfg.persistent_workers, prefetch_factor=cfg.prefetch_factor)
    train = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler, shuffle=False,
                       drop_last=cfg.drop_last, **common)
    test = DataLoader(test_set, batch_size=cfg.batch_size, shuffle=False, **common)
    out = Loaders(train, test, data_source, train_samples, len(test_set), details)
    if holdout is not None:  # the talk's validation images: the train files' last 10 %, with the test transform
        valid_set = train_set if cfg.dataset == "synthetic" else \
            _with_transform(train_set, test_transform or default_transform(cfg))
        out.valid, out.valid_samples = _valid_loader(cfg, valid_set, list(holdout.valid), rank, world_size,
                                                     common), len(holdout.valid)
    elif valid_set is not None:
        out.valid, out.valid_samples = _valid_loader(cfg, valid_set, None, rank, world_size, common), len(valid_set)
    return out


def _pooled_parts(pool: Dataset) -> tuple[Dataset, Dataset, Dataset]:
    """The course's 70 / 10 / 20 cut of a pooled dataset, in its RandomState(1) order."""
    cut = splits.course_pool_split(len(pool))
    return tuple(Subset(pool, positions.tolist()) for positions in (cut.train, cut.valid, cut.test))


def _with_transform(dataset: Dataset, transform: Callable) -> Dataset:
    """The same images with the test transform (the talk's valid_dataset: CIFAR10(train=True,
    transform=test_transforms)); a shallow copy shares the checked arrays."""
    copied = copy.copy(dataset)
    copied.transform = transform
    return copied


def _valid_loader(cfg: RunConfig, dataset: Dataset, indices: list[int] | None, rank: int, world_size: int,
                  common: dict) -> DataLoader:
    """The validation part's loader, as the sources built it: the talk a SubsetRandomSampler over the held-out
    indices, the course an unshuffled loader; never drop_last. Over ranks a DistributedSampler (unshuffled)
    gives each its share, padded to equal lengths so every rank runs the same number of batches (a sharded
    model's forward is a collective), as Fabric's setup_dataloaders and Lightning's Trainer did."""
    if world_size > 1:
        from torch.utils.data.distributed import DistributedSampler

        size = len(dataset) if indices is None else len(indices)
        sampler = ResumableSampler(DistributedSampler(range(size), num_replicas=world_size, rank=rank,
                                                      shuffle=False), indices)
    elif indices is not None:
        generator = torch.Generator().manual_seed(cfg.seed) if cfg.seed is not None else None
        sampler = SubsetRandomSampler(indices, generator=generator)
    else:
        sampler = None
    return DataLoader(dataset, batch_size=cfg.batch_size, sampler=sampler, shuffle=False, drop_last=False,
                      **common)
