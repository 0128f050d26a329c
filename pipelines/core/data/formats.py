"""The on-disk formats of the datasets, read by checked readers that accept only what a format holds.

Every file a loader uses is parsed here, never by torchvision's readers (which call `pickle.load`):
- IDX files (Fashion-MNIST) are checked for magic, rank, dimensions and exact length.
- CIFAR-10 batches go through `SafeUnpickler`, which refuses every global but numpy's array rebuild,
  so a batch that is a code-running pickle is refused before anything in it runs; the result must
  then have a batch's structure (uint8 N x 3072 `data`, one integer label per image).
- Labels must lie in 0..classes-1.
- IMDB reviews (`aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt`) must be regular files (no links)
  named as the archive names them, rated 7-10 in pos/ and 1-4 in neg/, UTF-8 text of sane size.
This module knows formats, not folders or fixes: a bad file raises `Malformed` or `Unreadable` with
its path, and `datafiles` turns that into the user's one-line fix. The writers `datafiles.generate`
uses live here too, so each format's layout (file names, headers, dict keys) sits beside its reader.
"""

from __future__ import annotations

import codecs
import gzip
import pickle
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
    globs: tuple[str, ...] = ()  # or, for a folder of many files (IMDB), the patterns of what they open


IMDB_GLOBS = ("train/neg/*.txt", "train/pos/*.txt", "test/neg/*.txt", "test/pos/*.txt")
IMDB_LABELS = ("neg", "pos")  # label 0 and 1, as torchtext and Hugging Face's `imdb` number them
IMDB_RATINGS = {"neg": range(1, 5), "pos": range(7, 11)}  # the archive's README: <= 4 negative, >= 7 positive
IMDB_NAME = re.compile(r"(\d+)_(\d+)\.txt")
IMDB_MAX_BYTES = 1 << 20  # the longest real review is about 14 kB; a megabyte is not a review


@dataclass
class Split:
    images: np.ndarray  # uint8: N x H x W (Fashion-MNIST) or N x H x W x C (CIFAR-10), torchvision's layouts
    labels: np.ndarray  # int64, 0 <= label < classes
    classes: list[str] | None  # CIFAR-10's label names from batches.meta; None for Fashion-MNIST


@dataclass
class TextSplit:
    texts: list[str]
    labels: np.ndarray  # int64: 0 neg, 1 pos
    ratings: np.ndarray  # int64: the star rating from each file name
    classes: list[str]


class Malformed(Exception):
    """A file is not what its format holds; `read_split` sets `path`, the caller adds the fix."""

    def __init__(self, reason: str, path: Path | None = None) -> None:
        super().__init__(reason)
        self.path = path


class Unreadable(Malformed):
    """The file could not be read at all (missing, permissions, I/O): the reason is the OS's. A subclass,
    so one `except Malformed` catches both; catch this one first to tell them apart."""


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
            raise Malformed(f"is not a readable pickle ({reason})") from None


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    entry = _unpickle(path)
    if not isinstance(entry, dict):
        raise Malformed(f"holds a {type(entry).__name__}, not the dict of a CIFAR-10 batch")
    data, labels = entry.get("data"), entry.get("labels")
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
            and data.shape[1] == CIFAR_PIXELS):
        raise Malformed(f"has no 'data' array of uint8 N x {CIFAR_PIXELS}")
    if not (isinstance(labels, list) and len(labels) == len(data) and all(type(v) is int for v in labels)):
        raise Malformed(f"has no 'labels' list of {len(data)} integers (one per image)")
    return data, _labels(np.array(labels, dtype=np.int64), 10)


def _cifar_classes(path: Path) -> list[str]:
    meta = _unpickle(path)
    names = meta.get("label_names") if isinstance(meta, dict) else None
    if not (isinstance(names, list) and len(names) == 10 and all(isinstance(n, str) for n in names)):
        raise Malformed("is not CIFAR-10's meta file (a dict whose 'label_names' lists 10 names)")
    return names


def _read_idx(path: Path, dims: tuple[int | None, ...]) -> np.ndarray:
    """IDX as Fashion-MNIST ships it: magic 0x000008 <rank> (unsigned bytes), big-endian uint32 dims, data."""
    blob = bytearray(path.read_bytes())  # writable, so torch.from_numpy shares it without a warning
    magic, header = bytes((0, 0, 0x08, len(dims))), 4 + 4 * len(dims)
    if len(blob) < header:
        raise Malformed(f"is truncated ({len(blob)} bytes, shorter than the {header}-byte IDX header)")
    if blob[:4] != magic:
        raise Malformed(f"has IDX magic 0x{blob[:4].hex()}, expected 0x{magic.hex()}")
    shape = struct.unpack(f">{len(dims)}I", blob[4:header])
    if any(want is not None and got != want for got, want in zip(shape, dims)):
        raise Malformed(f"has dimensions {shape}, expected {tuple('N' if d is None else d for d in dims)}")
    size = header + int(np.prod(shape))
    if len(blob) != size:
        raise Malformed(f"is {'truncated' if len(blob) < size else 'too long'} ({len(blob)} bytes, "
                        f"its header says {size})")
    return np.frombuffer(blob, dtype=np.uint8, offset=header).reshape(shape)


def _labels(labels: np.ndarray, classes: int) -> np.ndarray:
    bad = np.flatnonzero((labels < 0) | (labels >= classes))
    if len(bad):
        raise Malformed(f"has label {labels[bad[0]]} at index {bad[0]}; labels are 0-{classes - 1}")
    return labels.astype(np.int64)


def read_split(d: DatasetFiles, folder: Path, train: bool) -> Split | TextSplit:
    """One split's checked arrays from `folder`; a bad file raises `Malformed` naming it."""

    def read(filename: str, reader, *args):
        path = folder / filename
        try:
            return reader(path, *args)
        except Malformed as exc:
            raise Malformed(str(exc), path) from None
        except OSError as exc:
            raise Unreadable(exc.strerror or str(exc), path) from None

    if d.name == "imdb":
        return _imdb_split(folder / ("train" if train else "test"))
    if d.name == "cifar10":
        parts = [read(f, _cifar_batch) for f in (CIFAR_BATCHES if train else ("test_batch",))]
        images = np.concatenate([p[0] for p in parts]).reshape(-1, d.channels, d.size, d.size)
        return Split(images.transpose(0, 2, 3, 1), np.concatenate([p[1] for p in parts]),
                     read("batches.meta", _cifar_classes))
    prefix = "train" if train else "t10k"
    images = read(f"{prefix}-images-idx3-ubyte", _read_idx, (None, d.size, d.size))
    labels = read(f"{prefix}-labels-idx1-ubyte", lambda p: _labels(_read_idx(p, (len(images),)), d.classes))
    return Split(images, labels, None)


def _imdb_review(path: Path, rating_range: range) -> tuple[str, int]:
    """One review file: its text and the rating its name carries, both checked."""
    match = IMDB_NAME.fullmatch(path.name)
    if path.is_symlink() or not path.is_file():
        raise Malformed("is not a regular file (a review is a plain .txt file)")
    if not match:
        raise Malformed("is not named <id>_<rating>.txt as the archive names reviews")
    rating = int(match[2])
    if rating not in rating_range:
        raise Malformed(f"has rating {rating} in its name; {path.parent.name}/ holds ratings "
                        f"{rating_range.start}-{rating_range.stop - 1}")
    if path.stat().st_size > IMDB_MAX_BYTES:
        raise Malformed(f"is larger than {IMDB_MAX_BYTES} bytes, which no review is")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(f"is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise Malformed("is empty")
    return text, rating


def _imdb_split(split_folder: Path) -> TextSplit:
    """Every review of one split, in a fixed order (label, then file name); a bad file names itself."""
    texts, labels, ratings = [], [], []
    for label, name in enumerate(IMDB_LABELS):
        folder = split_folder / name
        if not folder.is_dir():
            raise Unreadable("is not a folder of reviews", folder)
        for path in sorted(folder.iterdir()):
            try:
                text, rating = _imdb_review(path, IMDB_RATINGS[name])
            except Malformed as exc:
                raise Malformed(str(exc), path) from None
            except OSError as exc:
                raise Unreadable(exc.strerror or str(exc), path) from None
            texts.append(text)
            labels.append(label)
            ratings.append(rating)
    if not texts:
        raise Malformed("holds no reviews", split_folder)
    return TextSplit(texts, np.array(labels, dtype=np.int64), np.array(ratings, dtype=np.int64),
                     list(IMDB_LABELS))


def write_imdb(folder: Path, splits: dict, vocabulary: list[str]) -> None:
    """`aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt` (ids count from 0 per folder, as the archive's),
    plus the archive's README and imdb.vocab beside them; splits: {"train": [(text, label, rating)]}."""
    for split, reviews in splits.items():
        counters = {name: 0 for name in IMDB_LABELS}
        for text, label, rating in reviews:
            name = IMDB_LABELS[label]
            (folder / split / name).mkdir(parents=True, exist_ok=True)
            (folder / split / name / f"{counters[name]}_{rating}.txt").write_text(text, encoding="utf-8")
            counters[name] += 1
    (folder / "imdb.vocab").write_text("".join(f"{word}\n" for word in vocabulary), encoding="utf-8")
    (folder / "README").write_text("Generated stand-in for the Large Movie Review Dataset v1.0 (aclImdb): "
                                   "same layout and file names, synthetic reviews.\n", encoding="utf-8")


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX format (as Fashion-MNIST ships it): magic with dtype 0x08 (ubyte) and rank, big-endian dims."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def _pickle(path: Path, obj: dict) -> None:
    """Protocol 2, the dict layout of the real batches (which torchvision unpickles with latin1 keys)."""
    with open(path, "wb") as handle:
        pickle.dump(obj, handle, protocol=2)


def write_fashion_mnist(folder: Path, splits: dict) -> None:
    """IDX files and the `.gz` archives of the same names, as torchvision's download leaves them."""
    for prefix, split in (("train", "train"), ("t10k", "test")):
        images, labels = splits[split]
        for kind, array in (("images-idx3", images[:, 0]), ("labels-idx1", labels)):
            path = folder / f"{prefix}-{kind}-ubyte"
            _write_idx(path, array)
            with open(f"{path}.gz", "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
                packed.write(path.read_bytes())  # the archive name torchvision downloads, for completeness


def write_cifar10(folder: Path, splits: dict) -> None:
    """Five train batches, the test batch and the meta file, in the real batches' dict layout."""
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
