"""Dataset files on disk: the dataset specs, fetch (torchvision's own download), generate, verify, read.

Data never executes code, and no file is trusted because of another file beside it:
- Every file a loader uses is parsed by `dataformats`' checked readers through `load_split` here: IDX
  checks and a pickle reader that refuses every global but numpy's array rebuild. torchvision's own
  readers (which call `pickle.load`) never open the files; its dataset classes get the checked arrays.
- Real data is checked against digests that live in code, torchvision's: CIFAR-10's per-file MD5s
  (`CIFAR10.train_list`, `test_list`, `meta`) and Fashion-MNIST's archive MD5s (`FashionMNIST.resources`),
  whose extracted files must equal the verified archives decompressed. The checksum list in the folder
  is not used for real data: whoever can write the folder can rewrite that list too.
- IMDB has no torchvision class: `fetch` downloads the real archive (aclImdb_v1.tar.gz) and checks it
  against the SHA-256 and MD5 kept here (the MD5 torchtext publishes, the SHA-256 other dataset
  libraries pin), extracts it refusing links and paths outside the folder, and keeps the archive in the
  folder: every review the reader opens must equal its member of the verified archive.
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
import os
import re
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Iterator

import numpy as np

from pipelines.core.spec.config import ConfigError
from pipelines.core.data.formats import (CIFAR_BATCHES, IMDB_GLOBS, IMDB_LABELS, IMDB_RATINGS, DatasetFiles,
                                        Malformed, Split, TextSplit, Unreadable, read_split, write_cifar10,
                                        write_fashion_mnist, write_imdb)

MANIFEST = "accel-checksums.sha256"
ORIGIN = "accel-origin.json"
SOURCES = ("real", "generated")
MAX_GENERATED = 60_000  # samples per split `generate` writes: the size of the real training sets

FILES = {
    "fashion_mnist": DatasetFiles("fashion_mnist", "FashionMNIST/raw", 1, 28, 10, tuple(
        f"{split}-{kind}-ubyte" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1"))),
    "cifar10": DatasetFiles("cifar10", "cifar-10-batches-py", 3, 32, 10,
                            (*CIFAR_BATCHES, "test_batch", "batches.meta")),
    "imdb": DatasetFiles("imdb", "aclImdb", 0, 0, 2, (), IMDB_GLOBS),  # text: no image shape
}

# The Large Movie Review Dataset v1.0 (Maas et al., 2011), as its authors publish it.
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_ARCHIVE = "aclImdb_v1.tar.gz"  # kept inside the dataset folder, as the source of truth for verify
IMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
IMDB_MD5 = "7c2ac02c03563afcf9b574c7e56c153a"  # torchtext.datasets.IMDB's
DOWNLOAD_TIMEOUT_S = 30


class DataError(ConfigError):
    """Missing or damaged dataset files: a user-fixable problem with a one-line fix."""


def spec(name: str) -> DatasetFiles:
    if name not in FILES:
        raise ConfigError(f"unknown dataset {name!r}; choose one of: {', '.join(FILES)}")
    return FILES[name]


def reader_files(name: str, folder: Path) -> list[str]:
    """The files the reader opens, relative to the dataset folder: a fixed list, or what the globs find."""
    d = spec(name)
    if not d.globs:
        return list(d.files)
    return sorted(str(path.relative_to(folder)) for pattern in d.globs for path in folder.glob(pattern))


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


def load_split(name: str, root: Path, train: bool) -> Split | TextSplit:
    """One split's checked arrays; the only way a loader reads dataset files. A bad file is a DataError
    naming it and the command that fixes it (the readers know formats, not the fix)."""
    try:
        return read_split(spec(name), Path(root) / spec(name).folder, train)
    except Unreadable as exc:
        raise DataError(f"{exc.path} cannot be read ({exc}); {fix_hint(name, root)}") from None
    except Malformed as exc:
        raise _damaged(exc.path, str(exc), name, root) from None


def _verify_listed(name: str, root: Path) -> list[str]:
    """Generated data: each reader's file against its line in the checksum list (and, for a folder of
    many files, no file the reader would open that the list does not name)."""
    d = spec(name)
    folder = root / d.folder
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise DataError(f"{manifest} is missing; {fix_hint(name, root)}")
    listed = {}
    for number, line in enumerate(manifest.read_text(errors="replace").splitlines(), start=1):
        match = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line)
        if not match or not _is_reader_file(d, match[2]):
            raise _damaged(manifest, f"line {number} is not '<sha256>  <{name} file>': {line[:60]!r}",
                           name, root)
        listed[match[2]] = match[1]
    expected = reader_files(name, folder)
    for filename in [*expected, *sorted(set(listed) - set(expected))]:
        path = folder / filename
        if filename not in listed and d.globs:
            raise _damaged(path, f"is not in {MANIFEST} (a generated folder holds only what it lists)", name, root)
        if filename not in listed:
            raise _damaged(manifest, "is empty" if not listed else f"has no line for {filename}", name, root)
        if not path.is_file():
            raise DataError(f"{path} is missing; {fix_hint(name, root)}")
        if digest(path) != listed[filename]:
            raise _damaged(path, "is corrupted or truncated (checksum mismatch)", name, root)
    return expected


def _is_reader_file(d: DatasetFiles, filename: str) -> bool:
    """A checksum line may name only a file the reader opens (never `../..` or an absolute path)."""
    if not d.globs:
        return filename in d.files
    path = PurePosixPath(filename)
    return ".." not in path.parts and not path.is_absolute() and any(path.match(g) for g in d.globs)


def _verify_real(name: str, root: Path) -> list[str]:
    """Real data: torchvision's MD5s, which live in its code (MD5 is theirs; a preimage is out of reach).

    CIFAR-10's are per batch file. Fashion-MNIST's are for the `.gz` archives that `fetch` keeps beside
    the extracted files, so each extracted file must equal its verified archive, decompressed.
    """
    folder = root / spec(name).folder
    if name == "imdb":
        return _verify_real_imdb(folder, name, root)
    import torchvision  # heavy (imports torch); only real data needs its digests

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


def _archive_digests(path: Path) -> tuple[str, str]:
    """(SHA-256, MD5) of the archive in one read."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
            md5.update(block)
    return sha.hexdigest(), md5.hexdigest()


def _check_imdb_archive(path: Path, name: str, root: Path) -> None:
    if not path.is_file():
        raise _damaged(path, "is missing (real IMDB is checked against the archive it came from)", name, root)
    if _archive_digests(path) != (IMDB_SHA256, IMDB_MD5):
        raise _damaged(path, "does not match the SHA-256/MD5 of aclImdb_v1.tar.gz kept in code", name, root)


def _imdb_members(tar: tarfile.TarFile, d: DatasetFiles) -> Iterator[tuple[tarfile.TarInfo, str | None]]:
    """Each member of the archive with its path inside the dataset folder, or None if it is not one a reader
    opens; a member that is a link, a device, absolute, or outside `aclImdb/` is refused."""
    for member in tar:
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or path.parts[:1] != (d.folder,) or not (
                member.isfile() or member.isdir()):
            raise Malformed(f"holds {member.name!r}, which is not a plain file or folder under {d.folder}/ "
                            "(refused: extracting it could write outside the dataset)", Path(tar.name))
        relative = str(PurePosixPath(*path.parts[1:]))
        yield member, (relative if member.isfile() and _is_reader_file(d, relative) else None)


def _verify_real_imdb(folder: Path, name: str, root: Path) -> list[str]:
    """The archive against the digests in code, then every review a reader opens against its member."""
    archive = folder / IMDB_ARCHIVE
    _check_imdb_archive(archive, name, root)
    members = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member, relative in _imdb_members(tar, spec(name)):
                if relative is not None:
                    members[relative] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    except Malformed as exc:
        raise _damaged(archive, str(exc), name, root) from None
    on_disk = reader_files(name, folder)
    for filename in sorted(set(on_disk) | set(members)):
        path = folder / filename
        if filename not in members:
            raise _damaged(path, f"is not in {IMDB_ARCHIVE} (real data holds only the archive's reviews)",
                           name, root)
        if not path.is_file() or digest(path) != members[filename]:
            raise _damaged(path, f"is missing or is not the content of its member of {IMDB_ARCHIVE}", name, root)
    return [IMDB_ARCHIVE, *on_disk]


# ----- writers: one dataset folder at a time, swapped into place ------------------------------------

def _missing_folders(root: Path) -> list[Path]:
    """The folders `root.mkdir(parents=True)` would create, deepest first."""
    missing, folder = [], Path(root).absolute()
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _locked(path: Path):
    """`path` opened and exclusively flock-ed, as the file that is at `path` now.

    A refused writer removes a lock file it created (`_exclusive`), so a waiter can wake holding the lock
    of a file no longer there while a newcomer locks a fresh file of the same name: both would write.
    Checking, once locked, that the path still names the locked file (same device and inode), and
    retrying when it does not, keeps one writer per dataset whoever removes the file (or its folder, which
    a refused writer that created it removes too: made again here)."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path, "a")
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            now, held = os.stat(path), os.fstat(lock.fileno())
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return lock
        lock.close()


@contextlib.contextmanager
def _exclusive(root: Path, name: str) -> Iterator[None]:
    """One writer per dataset at a time, across ranks and processes on this host.

    A refused or failed call (disk full, permission, damaged download) leaves nothing new behind: the
    lock file and any folders of `root` this call created are removed again, so `accel data generate`
    on a full disk does not leave a zero-byte `.<name>.lock` (and an empty root) for the user to find.
    A lock file that was there before stays: another writer may be waiting on it."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DataError(f"data root {root} is a file, not a folder; pass a folder with --root")
    created = _missing_folders(root)
    path = root / f".{name}.lock"
    try:
        root.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        lock = _locked(path)
    except OSError as exc:
        _remove_new(created)
        raise DataError(f"cannot write datasets under {root} ({exc.strerror or exc}); "
                        "pass a folder you can write with --root") from None
    finished = False
    with lock:
        try:
            yield
            finished = True
        finally:  # whatever stopped the call (refusal, full disk, Ctrl-C) propagates; only cleanup here
            if not finished and fresh:  # unlinked while held: a waiter sees the path changed, locks anew
                with contextlib.suppress(OSError):
                    path.unlink()
            fcntl.flock(lock, fcntl.LOCK_UN)
            if not finished:
                _remove_new(created)


def _remove_new(folders: list[Path]) -> None:
    """Remove the folders a refused call created (deepest first), each only if it is empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


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
    lines = [f"{digest(folder / f)}  {f}\n" for f in sorted(reader_files(origin["dataset"], folder))]
    (folder / MANIFEST).write_text("".join(lines))
    (folder / ORIGIN).write_text(json.dumps(origin, indent=2) + "\n")


def fetch(name: str, root: Path) -> Path:
    """Download (torchvision's own classes, which check the archive MD5s; IMDB: the archive, checked
    against the digests in code), verify, swap into place. Offline: the download's OSError propagates."""
    root = Path(root)
    with _exclusive(root, name):
        if (root / spec(name).folder / ORIGIN).is_file() and source(name, root) == "real":
            verify(name, root)
            return root / spec(name).folder
        with _staged(root, name) as stage:
            if name == "imdb":
                reader = _fetch_imdb(stage, root)
            else:
                reader = _fetch_torchvision(name, stage)
            _write_manifest(stage / spec(name).folder, {"source": "real", "dataset": name, "reader": reader})
            verify(name, stage)
    return root / spec(name).folder


def _fetch_torchvision(name: str, stage: Path) -> str:
    import torchvision  # heavy (imports torch); only the download needs it

    cls = {"fashion_mnist": torchvision.datasets.FashionMNIST, "cifar10": torchvision.datasets.CIFAR10}[name]
    for train in (True, False):
        cls(str(stage), train=train, download=True)  # raises if the archive MD5 does not match
    return f"torchvision.datasets.{cls.__name__}"


def _fetch_imdb(stage: Path, root: Path) -> str:
    """The real archive into the stage, checked before anything is extracted; then a checked extraction."""
    download = stage / IMDB_ARCHIVE
    with urllib.request.urlopen(IMDB_URL, timeout=DOWNLOAD_TIMEOUT_S) as response, open(download, "wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)
    if _archive_digests(download) != (IMDB_SHA256, IMDB_MD5):
        raise DataError(f"the archive downloaded from {IMDB_URL} does not match the SHA-256/MD5 of "
                        f"aclImdb_v1.tar.gz kept in code (damaged or replaced); nothing was changed under {root}")
    d = spec("imdb")
    with tarfile.open(download, "r:gz") as tar:
        try:
            checked = [member for member, _ in _imdb_members(tar, d)]  # every member, before any is written
        except Malformed as exc:
            raise DataError(f"the archive from {IMDB_URL} {exc}; nothing was changed under {root}") from None
        tar.extractall(stage, members=checked, filter="data")  # the stdlib's own guard on top of ours
    download.rename(stage / d.folder / IMDB_ARCHIVE)
    return "pipelines.core.data.formats (aclImdb text files)"


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


# Words of the generated reviews: most are neutral; each class leans on its own sentiment words, and the
# other class's words appear too (less often), so the signal is learnable but not trivial.
SENTIMENT_WORDS = (
    ("awful", "boring", "dull", "terrible", "waste", "worst", "poorly", "mess", "annoying", "bland",
     "stupid", "predictable", "disappointing", "lame", "pointless"),
    ("great", "wonderful", "superb", "moving", "brilliant", "best", "beautifully", "gem", "charming",
     "gripping", "touching", "masterpiece", "delightful", "fine", "memorable"),
)
SYLLABLES = ("ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "po", "an", "el", "or", "un", "is")


def _reviews(rng: np.random.Generator, count: int, words: list[str]) -> list[tuple[str, int, int]]:
    """(text, label, rating) per review: 20-120 words, sentences, the archive's `<br /><br />` breaks."""
    reviews = []
    for _ in range(count):
        label = int(rng.integers(0, 2))
        rating = int(rng.choice(IMDB_RATINGS[IMDB_LABELS[label]]))
        length = int(rng.integers(20, 121))
        kind = rng.choice(3, size=length, p=[0.84, 0.11, 0.05])  # neutral, own class, other class
        tokens = [words[rng.integers(len(words))] if k == 0 else
                  rng.choice(SENTIMENT_WORDS[label if k == 1 else 1 - label]) for k in kind]
        sentences = [" ".join(tokens[i:i + 12]).capitalize() + "." for i in range(0, length, 12)]
        breaks = rng.integers(0, len(sentences))
        text = " ".join(sentences[:breaks]) + (" <br /><br />" if breaks else "") + " ".join(sentences[breaks:])
        reviews.append((text.strip(), label, rating))
    return reviews


def _vocabulary() -> list[str]:
    """The neutral words: every two-syllable pseudo-word, the same for every seed."""
    return sorted({a + b for a in SYLLABLES for b in SYLLABLES})


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
    if name == "imdb":
        words = _vocabulary()
        splits = {split: _reviews(rng, count, words) for split, count in (("train", train), ("test", test))}
        signal = "sentiment words per class (11 % own class, 5 % other class) among neutral pseudo-words"
    else:
        for split, count in (("train", train), ("test", test)):
            labels = rng.integers(0, d.classes, size=count).astype(np.uint8)
            splits[split] = (_images(rng, labels, d), labels)
        signal = "per-class smooth prototype + gaussian noise"
    root = Path(root)
    with _exclusive(root, name), _out_of_space(root, name), _staged(root, name) as stage:
        folder = stage / d.folder
        folder.mkdir(parents=True)
        if name == "imdb":
            write_imdb(folder, splits, [*words, *(w for group in SENTIMENT_WORDS for w in group)])
        else:
            (write_fashion_mnist if name == "fashion_mnist" else write_cifar10)(folder, splits)
        _write_manifest(folder, {"source": "generated", "dataset": name, "train": train, "test": test,
                                 "seed": seed, "signal": signal})
        verify(name, stage)
    return root / d.folder
