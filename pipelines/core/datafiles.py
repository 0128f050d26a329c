"""Dataset files on disk: fetch (torchvision's own download), generate (true on-disk formats), verify.

Real data is checked against the archive checksums torchvision ships; the extracted files are then
recorded in `accel-checksums.sha256` so later corruption of what the readers actually open is caught.
Generated data writes Fashion-MNIST IDX files and CIFAR-10 python batches that the unmodified
torchvision readers load, with a deterministic, learnable class signal, plus the same manifest
(marked `generated`) so every result can say which kind of data it ran on.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from pipelines.core.config import ConfigError

MANIFEST = "accel-checksums.sha256"
ORIGIN = "accel-origin.json"


@dataclass(frozen=True)
class DatasetFiles:
    name: str
    folder: str  # torchvision's folder under the data root
    channels: int
    size: int
    classes: int


FILES = {
    "fashion_mnist": DatasetFiles("fashion_mnist", "FashionMNIST/raw", 1, 28, 10),
    "cifar10": DatasetFiles("cifar10", "cifar-10-batches-py", 3, 32, 10),
}


class DataError(ConfigError):
    """Missing or damaged dataset files: a user-fixable problem with a one-line fix."""


def spec(name: str) -> DatasetFiles:
    if name not in FILES:
        raise ConfigError(f"unknown dataset {name!r}; choose one of: {', '.join(FILES)}")
    return FILES[name]


def fix_hint(name: str, root: Path) -> str:
    return (f"run `accel data fetch {name} --root {root}` (needs internet) or "
            f"`accel data generate {name} --root {root}` (offline, generated data)")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_manifest(folder: Path, files: list[Path], origin: dict) -> None:
    lines = [f"{sha256(f)}  {f.name}\n" for f in sorted(files)]
    (folder / MANIFEST).write_text("".join(lines))
    (folder / ORIGIN).write_text(json.dumps(origin, indent=2) + "\n")


def source(name: str, root: Path) -> str:
    """'real' or 'generated' from the origin file; a clear error if the dataset is absent."""
    folder = Path(root) / spec(name).folder
    origin = folder / ORIGIN
    if not origin.is_file():
        raise DataError(f"dataset {name} not found under {root}; {fix_hint(name, root)}")
    return json.loads(origin.read_text())["source"]


def verify(name: str, root: Path) -> list[str]:
    """Check every recorded file; raise DataError naming the first bad file and the fix."""
    folder = Path(root) / spec(name).folder
    source(name, root)
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise DataError(f"{manifest} is missing; {fix_hint(name, root)}")
    checked = []
    for line in manifest.read_text().splitlines():
        expected, filename = line.split("  ", 1)
        path = folder / filename
        if not path.is_file():
            raise DataError(f"{path} is missing; {fix_hint(name, root)}")
        if sha256(path) != expected:
            raise DataError(f"{path} is corrupted or truncated (checksum mismatch); delete "
                            f"{folder} and {fix_hint(name, root)}")
        checked.append(filename)
    return checked


@contextlib.contextmanager
def _exclusive(root: Path, name: str) -> Iterator[None]:
    """One download per dataset at a time, across ranks and processes on this host."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def fetch(name: str, root: Path) -> Path:
    """Download with torchvision's own classes (which check the archive MD5s), then record checksums."""
    import torchvision

    root = Path(root)
    folder = root / spec(name).folder
    with _exclusive(root, name):
        if (folder / ORIGIN).is_file() and source(name, root) == "real":
            verify(name, root)
            return folder
        cls = {"fashion_mnist": torchvision.datasets.FashionMNIST,
               "cifar10": torchvision.datasets.CIFAR10}[name]
        for train in (True, False):
            cls(str(root), train=train, download=True)  # raises if the archive MD5 does not match
        files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith("accel-")
                 and p.suffix not in (".gz", ".tar")]
        _write_manifest(folder, files, {"source": "real", "dataset": name,
                                        "reader": f"torchvision.datasets.{cls.__name__}"})
    return folder


def _images(rng: np.random.Generator, labels: np.ndarray, d: DatasetFiles) -> np.ndarray:
    """Each class is a fixed smooth pattern; samples are that pattern plus noise and a brightness jitter.

    The signal is strong enough that a small CNN beats chance within a few hundred steps, and weak
    enough (noise, overlap) that accuracy does not saturate instantly.
    """
    proto_rng = np.random.default_rng(1234)  # prototypes are the same for every seed and split
    coarse = proto_rng.uniform(0, 1, size=(d.classes, d.channels, 4, 4))
    prototypes = coarse.repeat(d.size // 4, axis=2).repeat(d.size // 4, axis=3)
    noise = rng.normal(0.0, 0.35, size=(len(labels), d.channels, d.size, d.size))
    jitter = rng.uniform(-0.15, 0.15, size=(len(labels), 1, 1, 1))
    pixels = np.clip(prototypes[labels] * 0.8 + noise + jitter + 0.1, 0.0, 1.0)
    return (pixels * 255).astype(np.uint8)


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX format (as Fashion-MNIST ships it): magic with dtype 0x08 (ubyte) and rank, big-endian dims."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def generate(name: str, root: Path, train: int, test: int, seed: int = 0) -> Path:
    d = spec(name)
    if train < 1 or test < 1:
        raise ConfigError(f"--train and --test must be at least 1, got {train} and {test}")
    rng = np.random.default_rng(seed)
    folder = Path(root) / d.folder
    folder.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, count in (("train", train), ("test", test)):
        labels = rng.integers(0, d.classes, size=count).astype(np.uint8)
        splits[split] = (_images(rng, labels, d), labels)
    written: list[Path] = []
    if name == "fashion_mnist":
        for prefix, split in (("train", "train"), ("t10k", "test")):
            images, labels = splits[split]
            for kind, array in (("images-idx3", images[:, 0]), ("labels-idx1", labels)):
                path = folder / f"{prefix}-{kind}-ubyte"
                _write_idx(path, array)
                with open(f"{path}.gz", "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
                    packed.write(path.read_bytes())  # the archive name torchvision downloads, for completeness
                written.append(path)
    else:
        images, labels = splits["train"]
        for index, part in enumerate(np.array_split(np.arange(train), 5), start=1):
            batch = {"batch_label": f"training batch {index} of 5", "labels": labels[part].tolist(),
                     "data": images[part].reshape(len(part), -1),
                     "filenames": [f"generated_{i}.png" for i in part]}
            written.append(_pickle(folder / f"data_batch_{index}", batch))
        images, labels = splits["test"]
        written.append(_pickle(folder / "test_batch", {
            "batch_label": "testing batch 1 of 1", "labels": labels.tolist(),
            "data": images.reshape(test, -1), "filenames": ["generated.png"] * test}))
        names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
        written.append(_pickle(folder / "batches.meta", {"label_names": names, "num_cases_per_batch": train // 5,
                                                          "num_vis": 3072}))
    _write_manifest(folder, written, {"source": "generated", "dataset": name, "train": train,
                                      "test": test, "seed": seed,
                                      "signal": "per-class smooth prototype + gaussian noise"})
    return folder


def _pickle(path: Path, obj: dict) -> Path:
    """Protocol 2, the dict layout of the real batches (which torchvision unpickles with latin1 keys)."""
    with open(path, "wb") as handle:
        pickle.dump(obj, handle, protocol=2)
    return path
