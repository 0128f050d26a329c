"""Dataset files on disk: fetch (torchvision's own download), generate (true on-disk formats), verify, read.

Data never executes code, and no file is trusted because of another file beside it:
- Every file a loader uses is parsed here, by readers that accept only what the format holds. IDX
  files are checked for magic, rank, dimensions and exact length; CIFAR-10 batches go through
  `SafeUnpickler`, which refuses every global but numpy's array rebuild, so a batch that is a
  code-running pickle is refused before anything in it runs. torchvision's own readers (which call
  `pickle.load`) never open the files; its dataset classes get the checked arrays (`data.py`).
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

import codecs
import contextlib
import fcntl
import gzip
import hashlib
import json
import pickle
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from pipelines.core.config import ConfigError

MANIFEST = "accel-checksums.sha256"
ORIGIN = "accel-origin.json"
SOURCES = ("real", "generated")
CIFAR_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_PIXELS = 3 * 32 * 32


@dataclass(frozen=True)
class DatasetFiles:
    name: str
    folder: str  # torchvision's folder under the data root
    channels: int
    size: int
    classes: int
    files: tuple[str, ...]  # what the readers open: each must be listed and intact


FILES = {
    "fashion_mnist": DatasetFiles("fashion_mnist", "FashionMNIST/raw", 1, 28, 10, tuple(
        f"{split}-{kind}-ubyte" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1"))),
    "cifar10": DatasetFiles("cifar10", "cifar-10-batches-py", 3, 32, 10,
                            (*CIFAR_BATCHES, "test_batch", "batches.meta")),
}


class DataError(ConfigError):
    """Missing or damaged dataset files: a user-fixable problem with a one-line fix."""


class _Malformed(Exception):
    """What a reader found wrong in one file; the caller adds the file's path and the fix."""


@dataclass
class Split:
    images: np.ndarray  # uint8: N x H x W (Fashion-MNIST) or N x H x W x C (CIFAR-10), torchvision's layouts
    labels: np.ndarray  # int64, 0 <= label < classes
    classes: list[str] | None  # CIFAR-10's label names from batches.meta; None for Fashion-MNIST


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


# ----- readers: only what the formats hold --------------------------------------------------------

_RECONSTRUCT = np.zeros(0).__reduce__()[0]  # numpy's array rebuild; numpy 1 and 2 name its module differently


def _latin1_bytes(text: str, encoding: str = "utf-8") -> bytes:
    """`_codecs.encode`, as protocol 2 spells a Python 3 bytes object; only the latin1 it writes passes."""
    if encoding != "latin1":
        raise pickle.UnpicklingError(f"it encodes text as {encoding!r}, which a data file never does")
    return codecs.encode(text, "latin1")


class SafeUnpickler(pickle.Unpickler):
    """Rebuilds dicts, lists, strings, numbers and numpy arrays, nothing else.

    A pickle runs code only through the globals it names (`os.system`, `builtins.eval`, ...); every
    global but numpy's array rebuild path and the bytes spelling is refused before it is called.
    """

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,  # numpy 1 writers (the real batches)
               ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,  # numpy 2 writers
               ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("_codecs", "encode"): _latin1_bytes}

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it refers to {module}.{name}, which a data file never holds")
        return self.ALLOWED[module, name]


def _unpickle(path: Path) -> object:
    """Latin1 for the py2 strings of the real batches, as torchvision reads them."""
    with open(path, "rb") as handle:
        try:
            return SafeUnpickler(handle, encoding="latin1").load()
        except Exception as exc:  # anything a hostile or damaged pickle raises means the same: not a batch
            reason = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise _Malformed(f"is not a readable pickle ({reason})") from None


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    entry = _unpickle(path)
    if not isinstance(entry, dict):
        raise _Malformed(f"holds a {type(entry).__name__}, not the dict of a CIFAR-10 batch")
    data, labels = entry.get("data"), entry.get("labels")
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
            and data.shape[1] == CIFAR_PIXELS):
        raise _Malformed(f"has no 'data' array of uint8 N x {CIFAR_PIXELS}")
    if not (isinstance(labels, list) and len(labels) == len(data) and all(type(v) is int for v in labels)):
        raise _Malformed(f"has no 'labels' list of {len(data)} integers (one per image)")
    return data, _labels(np.array(labels, dtype=np.int64), 10)


def _cifar_classes(path: Path) -> list[str]:
    meta = _unpickle(path)
    names = meta.get("label_names") if isinstance(meta, dict) else None
    if not (isinstance(names, list) and len(names) == 10 and all(isinstance(n, str) for n in names)):
        raise _Malformed("is not CIFAR-10's meta file (a dict whose 'label_names' lists 10 names)")
    return names


def _read_idx(path: Path, dims: tuple[int | None, ...]) -> np.ndarray:
    """IDX as Fashion-MNIST ships it: magic 0x000008 <rank> (unsigned bytes), big-endian uint32 dims, data."""
    blob = bytearray(path.read_bytes())  # writable, so torch.from_numpy shares it without a warning
    magic, header = bytes((0, 0, 0x08, len(dims))), 4 + 4 * len(dims)
    if len(blob) < header:
        raise _Malformed(f"is truncated ({len(blob)} bytes, shorter than the {header}-byte IDX header)")
    if blob[:4] != magic:
        raise _Malformed(f"has IDX magic 0x{blob[:4].hex()}, expected 0x{magic.hex()}")
    shape = struct.unpack(f">{len(dims)}I", blob[4:header])
    if any(want is not None and got != want for got, want in zip(shape, dims)):
        raise _Malformed(f"has dimensions {shape}, expected {tuple('N' if d is None else d for d in dims)}")
    size = header + int(np.prod(shape))
    if len(blob) != size:
        raise _Malformed(f"is {'truncated' if len(blob) < size else 'too long'} ({len(blob)} bytes, "
                         f"its header says {size})")
    return np.frombuffer(blob, dtype=np.uint8, offset=header).reshape(shape)


def _labels(labels: np.ndarray, classes: int) -> np.ndarray:
    bad = np.flatnonzero((labels < 0) | (labels >= classes))
    if len(bad):
        raise _Malformed(f"has label {labels[bad[0]]} at index {bad[0]}; labels are 0-{classes - 1}")
    return labels.astype(np.int64)


def load_split(name: str, root: Path, train: bool) -> Split:
    """One split's checked arrays; the only way a loader reads dataset files."""
    d = spec(name)
    folder = Path(root) / d.folder

    def read(filename: str, reader, *args):
        try:
            return reader(folder / filename, *args)
        except _Malformed as exc:
            raise _damaged(folder / filename, str(exc), name, root) from None
        except OSError as exc:
            raise DataError(f"{folder / filename} cannot be read ({exc.strerror or exc}); "
                            f"{fix_hint(name, root)}") from None

    if name == "cifar10":
        parts = [read(f, _cifar_batch) for f in (CIFAR_BATCHES if train else ("test_batch",))]
        images = np.concatenate([p[0] for p in parts]).reshape(-1, d.channels, d.size, d.size)
        return Split(images.transpose(0, 2, 3, 1), np.concatenate([p[1] for p in parts]),
                     read("batches.meta", _cifar_classes))
    prefix = "train" if train else "t10k"
    images = read(f"{prefix}-images-idx3-ubyte", _read_idx, (None, d.size, d.size))
    labels = read(f"{prefix}-labels-idx1-ubyte", lambda p: _labels(_read_idx(p, (len(images),)), d.classes))
    return Split(images, labels, None)


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


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX format (as Fashion-MNIST ships it): magic with dtype 0x08 (ubyte) and rank, big-endian dims."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def generate(name: str, root: Path, train: int, test: int, seed: int = 0) -> Path:
    """Build the dataset in a staged folder, verify it, swap it into place (under the dataset's lock)."""
    d = spec(name)
    if train < 1 or test < 1:
        raise ConfigError(f"--train and --test must be at least 1, got {train} and {test}")
    rng = np.random.default_rng(seed)
    splits = {}
    for split, count in (("train", train), ("test", test)):
        labels = rng.integers(0, d.classes, size=count).astype(np.uint8)
        splits[split] = (_images(rng, labels, d), labels)
    root = Path(root)
    with _exclusive(root, name), _staged(root, name) as stage:
        folder = stage / d.folder
        folder.mkdir(parents=True)
        (_write_fashion_mnist if name == "fashion_mnist" else _write_cifar10)(folder, splits)
        _write_manifest(folder, {"source": "generated", "dataset": name, "train": train, "test": test,
                                 "seed": seed, "signal": "per-class smooth prototype + gaussian noise"})
        verify(name, stage)
    return root / d.folder


def _write_fashion_mnist(folder: Path, splits: dict) -> None:
    for prefix, split in (("train", "train"), ("t10k", "test")):
        images, labels = splits[split]
        for kind, array in (("images-idx3", images[:, 0]), ("labels-idx1", labels)):
            path = folder / f"{prefix}-{kind}-ubyte"
            _write_idx(path, array)
            with open(f"{path}.gz", "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
                packed.write(path.read_bytes())  # the archive name torchvision downloads, for completeness


def _write_cifar10(folder: Path, splits: dict) -> None:
    images, labels = splits["train"]
    for index, part in enumerate(np.array_split(np.arange(len(labels)), len(CIFAR_BATCHES)), start=1):
        _pickle(folder / f"data_batch_{index}", {
            "batch_label": f"training batch {index} of 5", "labels": labels[part].tolist(),
            "data": images[part].reshape(len(part), -1), "filenames": [f"generated_{i}.png" for i in part]})
    images, labels = splits["test"]
    _pickle(folder / "test_batch", {"batch_label": "testing batch 1 of 1", "labels": labels.tolist(),
                                    "data": images.reshape(len(labels), -1),
                                    "filenames": ["generated.png"] * len(labels)})
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    _pickle(folder / "batches.meta", {"label_names": names, "num_vis": CIFAR_PIXELS,
                                      "num_cases_per_batch": len(splits["train"][1]) // len(CIFAR_BATCHES)})


def _pickle(path: Path, obj: dict) -> None:
    """Protocol 2, the dict layout of the real batches (which torchvision unpickles with latin1 keys)."""
    with open(path, "wb") as handle:
        pickle.dump(obj, handle, protocol=2)
