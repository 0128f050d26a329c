"""Dataset files on disk: the dataset specs, fetch (torchvision's own download), generate, verify, read.

Data never executes code, and no file is trusted because of another file beside it:
- Every file a loader uses is parsed by `dataformats`' checked readers through `load_split` here: IDX
  checks and a pickle reader that refuses every global but numpy's array rebuild. torchvision's own
  readers (which call `pickle.load`) never open the files; its dataset classes get the checked arrays.
- Real data is checked against digests that live in code, torchvision's: CIFAR-10's per-file MD5s
  (`CIFAR10.train_list`, `test_list`, `meta`) and Fashion-MNIST's archive MD5s (`FashionMNIST.resources`),
  whose extracted files must equal the verified archives decompressed. The checksum list in the folder
  is not used for real data: whoever can write the folder can rewrite that list too.
- Generated data has no digest in code: its list (`accel-checksums.sha256`) catches corruption, and the
  readers' checks keep a damaged or hostile file from running code or reaching a model.
`generate` and `fetch` hold the dataset's lock and build in a temporary folder that is swapped into
place, so two writers leave one complete dataset, never a mix of both.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from pipelines.core.config import ConfigError
from pipelines.core.dataformats import (CIFAR_BATCHES, DatasetFiles, Malformed, Split, Unreadable,
                                        read_split, write_cifar10, write_fashion_mnist)

MANIFEST = "accel-checksums.sha256"
ORIGIN = "accel-origin.json"
SOURCES = ("real", "generated")
MAX_GENERATED = 60_000  # samples per split `generate` writes: the size of the real training sets

FILES = {
    "fashion_mnist": DatasetFiles("fashion_mnist", "FashionMNIST/raw", 1, 28, 10, tuple(
        f"{split}-{kind}-ubyte" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1"))),
    "cifar10": DatasetFiles("cifar10", "cifar-10-batches-py", 3, 32, 10,
                            (*CIFAR_BATCHES, "test_batch", "batches.meta")),
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


def _damaged(path: Path, what: str, name: str, root: Path) -> DataError:
    folder = Path(root) / spec(name).folder
    return DataError(f"{path} {what}; delete {folder} and {fix_hint(name, root)}")


def digest(path: Path, algorithm: str = "sha256", opener=open) -> str:
    """Hex digest of a file's bytes; `opener=gzip.open` hashes what an archive decompresses to."""
    hasher = hashlib.new(algorithm)
    with opener(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def source(name: str, root: Path) -> str:
    """'real' or 'generated' from the origin file; a clear error if it is absent or not ours."""
    origin = Path(root) / spec(name).folder / ORIGIN
    if not origin.is_file():
        raise DataError(f"dataset {name} not found under {root}; {fix_hint(name, root)}")
    try:
        recorded = json.loads(origin.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: all the same to the user
        recorded = None
    kind = recorded.get("source") if isinstance(recorded, dict) else None
    if kind not in SOURCES:
        raise _damaged(origin, 'does not say "source": "real" or "generated"', name, root)
    return kind


def verify(name: str, root: Path) -> list[str]:
    """Check every file a reader opens, its digest and its structure; DataError names the first bad one."""
    root = Path(root)
    checked = _verify_real(name, root) if source(name, root) == "real" else _verify_listed(name, root)
    for train in (True, False):
        load_split(name, root, train)  # the format checks: no code runs, shapes and labels are sane
    return checked


def load_split(name: str, root: Path, train: bool) -> Split:
    """One split's checked arrays; the only way a loader reads dataset files. A bad file is a DataError
    naming it and the command that fixes it (the readers know formats, not the fix)."""
    try:
        return read_split(spec(name), Path(root) / spec(name).folder, train)
    except Unreadable as exc:
        raise DataError(f"{exc.path} cannot be read ({exc}); {fix_hint(name, root)}") from None
    except Malformed as exc:
        raise _damaged(exc.path, str(exc), name, root) from None


def _verify_listed(name: str, root: Path) -> list[str]:
    """Generated data: each reader's file against its line in the checksum list."""
    folder = root / spec(name).folder
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise DataError(f"{manifest} is missing; {fix_hint(name, root)}")
    listed = {}
    for number, line in enumerate(manifest.read_text(errors="replace").splitlines(), start=1):
        match = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line)
        if not match or match[2] not in spec(name).files:
            raise _damaged(manifest, f"line {number} is not '<sha256>  <{name} file>': {line[:60]!r}",
                           name, root)
        listed[match[2]] = match[1]
    for filename in spec(name).files:
        path = folder / filename
        if filename not in listed:
            raise _damaged(manifest, "is empty" if not listed else f"has no line for {filename}", name, root)
        if not path.is_file():
            raise DataError(f"{path} is missing; {fix_hint(name, root)}")
        if digest(path) != listed[filename]:
            raise _damaged(path, "is corrupted or truncated (checksum mismatch)", name, root)
    return list(spec(name).files)


def _verify_real(name: str, root: Path) -> list[str]:
    """Real data: torchvision's MD5s, which live in its code (MD5 is theirs; a preimage is out of reach).

    CIFAR-10's are per batch file. Fashion-MNIST's are for the `.gz` archives that `fetch` keeps beside
    the extracted files, so each extracted file must equal its verified archive, decompressed.
    """
    import torchvision  # heavy (imports torch); only real data needs its digests

    folder = root / spec(name).folder
    if name == "cifar10":
        cifar = torchvision.datasets.CIFAR10
        expected = [*cifar.train_list, *cifar.test_list, [cifar.meta["filename"], cifar.meta["md5"]]]
    else:
        expected = torchvision.datasets.FashionMNIST.resources
    for filename, md5 in expected:
        path = folder / filename
        if not path.is_file():
            raise _damaged(path, "is missing (real data is checked against torchvision's MD5 of it)",
                           name, root)
        if digest(path, "md5") != md5:
            raise _damaged(path, "does not match torchvision's MD5 of the real file", name, root)
        extracted = path.with_suffix("")  # Fashion-MNIST: the file the reader opens, beside its archive
        unpacked = digest(path, opener=gzip.open) if path.suffix == ".gz" else None
        if unpacked and not (extracted.is_file() and digest(extracted) == unpacked):
            raise _damaged(extracted, f"is missing or is not the content of {path.name}", name, root)
    return [filename for filename, _ in expected]


# ----- writers: one dataset folder at a time, swapped into place ------------------------------------

@contextlib.contextmanager
def _exclusive(root: Path, name: str) -> Iterator[None]:
    """One writer per dataset at a time, across ranks and processes on this host."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DataError(f"data root {root} is a file, not a folder; pass a folder with --root")
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f".{name}.lock", "w")
    except OSError as exc:
        raise DataError(f"cannot write datasets under {root} ({exc.strerror or exc}); "
                        "pass a folder you can write with --root") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _staged(root: Path, name: str) -> Iterator[Path]:
    """A temporary data root to build the dataset in; on success its folder replaces the dataset's.

    Call it holding `_exclusive`. The swap is two renames (old folder aside, new one in), so a reader
    sees the old dataset or the new one, never a mix. Temporaries a killed writer left are removed first.
    """
    for stale in Path(root).glob(f".accel-{name}.*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(dir=root, prefix=f".accel-{name}.", suffix=".tmp"))
    try:
        yield stage
        final = Path(root) / spec(name).folder
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists() or final.is_symlink():
            final.rename(stage / "previous")
        (stage / spec(name).folder).rename(final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def _out_of_space(root: Path, name: str) -> Iterator[None]:
    """A write that fails mid-build (disk full, quota) is one line; `_staged` has removed the partial copy."""
    try:
        yield
    except OSError as exc:
        raise DataError(f"could not write {name} under {root} ({exc.strerror or exc}); free space there "
                        "or pass another --root") from None


def _write_manifest(folder: Path, origin: dict) -> None:
    lines = [f"{digest(folder / f)}  {f}\n" for f in sorted(FILES[origin["dataset"]].files)]
    (folder / MANIFEST).write_text("".join(lines))
    (folder / ORIGIN).write_text(json.dumps(origin, indent=2) + "\n")


def fetch(name: str, root: Path) -> Path:
    """Download with torchvision's own classes (which check the archive MD5s), verify, swap into place."""
    import torchvision  # heavy (imports torch); only the download needs it

    root = Path(root)
    with _exclusive(root, name):
        if (root / spec(name).folder / ORIGIN).is_file() and source(name, root) == "real":
            verify(name, root)
            return root / spec(name).folder
        cls = {"fashion_mnist": torchvision.datasets.FashionMNIST,
               "cifar10": torchvision.datasets.CIFAR10}[name]
        with _staged(root, name) as stage:
            for train in (True, False):
                cls(str(stage), train=train, download=True)  # raises if the archive MD5 does not match
            _write_manifest(stage / spec(name).folder, {"source": "real", "dataset": name,
                                                        "reader": f"torchvision.datasets.{cls.__name__}"})
            verify(name, stage)
    return root / spec(name).folder


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


def generate(name: str, root: Path, train: int, test: int, seed: int = 0) -> Path:
    """Build the dataset in a staged folder, verify it, swap it into place (under the dataset's lock)."""
    d = spec(name)
    if train < 1 or test < 1:
        raise ConfigError(f"--train and --test must be at least 1, got {train} and {test}")
    if max(train, test) > MAX_GENERATED:
        raise ConfigError(f"--train and --test must be at most {MAX_GENERATED:,} (the size of the real sets), "
                          f"got {train:,} and {test:,}")
    if not 0 <= seed < 2**63:
        raise ConfigError(f"--seed must be 0 or more, got {seed}")
    rng = np.random.default_rng(seed)
    splits = {}
    for split, count in (("train", train), ("test", test)):
        labels = rng.integers(0, d.classes, size=count).astype(np.uint8)
        splits[split] = (_images(rng, labels, d), labels)
    root = Path(root)
    with _exclusive(root, name), _out_of_space(root, name), _staged(root, name) as stage:
        folder = stage / d.folder
        folder.mkdir(parents=True)
        (write_fashion_mnist if name == "fashion_mnist" else write_cifar10)(folder, splits)
        _write_manifest(folder, {"source": "generated", "dataset": name, "train": train, "test": test,
                                 "seed": seed, "signal": "per-class smooth prototype + gaussian noise"})
        verify(name, stage)
    return root / d.folder
