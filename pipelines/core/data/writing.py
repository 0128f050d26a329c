"""Putting a dataset folder in place, one writer at a time: the per-dataset lock, a staged copy swapped in
with two renames (readers see the old folder or the new one, never a mix), the checksum manifest, and
`fetch` (the published files, downloaded and checked before anything is swapped in). `generate`
(data/generator.py) writes through the same lock and stage.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Iterator

from pipelines.core.data import files  # its IMDB_* constants read at call time (tests point them elsewhere)
from pipelines.core.data.files import (MANIFEST, ORIGIN, DataError, archive_digests, digest, imdb_members,
                                       reader_files, source, spec, verify)
from pipelines.core.data.formats import Malformed

def missing_folders(root: Path) -> list[Path]:
    """The folders `root.mkdir(parents=True)` would create, deepest first."""
    missing, folder = [], Path(root).absolute()
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def locked(path: Path):
    """`path` opened and exclusively flock-ed, as the file that is at `path` now.

    A refused writer removes a lock file it created (`exclusive`), so a waiter can wake holding the lock
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
def exclusive(root: Path, name: str) -> Iterator[None]:
    """One writer per dataset at a time, across ranks and processes on this host.

    A refused or failed call (disk full, permission, damaged download) leaves nothing new behind: the
    lock file and any folders of `root` this call created are removed again, so `accel data generate`
    on a full disk does not leave a zero-byte `.<name>.lock` (and an empty root) for the user to find.
    A lock file that was there before stays: another writer may be waiting on it."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DataError(f"data root {root} is a file, not a folder; pass a folder with --root")
    created = missing_folders(root)
    path = root / f".{name}.lock"
    try:
        root.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        lock = locked(path)
    except OSError as exc:
        remove_new(created)
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
                remove_new(created)


def remove_new(folders: list[Path]) -> None:
    """Remove the folders a refused call created (deepest first), each only if it is empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def staged(root: Path, name: str) -> Iterator[Path]:
    """A temporary data root to build the dataset in; on success its folder replaces the dataset's.

    Call it holding `exclusive`. The swap is two renames (old folder aside, new one in), so a reader
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
def out_of_space(root: Path, name: str) -> Iterator[None]:
    """A write that fails mid-build (disk full, quota) is one line; `staged` has removed the partial copy."""
    try:
        yield
    except OSError as exc:
        raise DataError(f"could not write {name} under {root} ({exc.strerror or exc}); free space there "
                        "or pass another --root") from None


def write_manifest(folder: Path, origin: dict) -> None:
    lines = [f"{digest(folder / f)}  {f}\n" for f in sorted(reader_files(origin["dataset"], folder))]
    (folder / MANIFEST).write_text("".join(lines))
    (folder / ORIGIN).write_text(json.dumps(origin, indent=2) + "\n")


def fetch(name: str, root: Path) -> Path:
    """Download (torchvision's own classes, which check the archive MD5s; IMDB: the archive, checked
    against the digests in code), verify, swap into place. Offline: the download's OSError propagates."""
    root = Path(root)
    with exclusive(root, name):
        if (root / spec(name).folder / ORIGIN).is_file() and source(name, root) == "real":
            verify(name, root)
            return root / spec(name).folder
        with staged(root, name) as stage:
            if name == "imdb":
                reader = _fetch_imdb(stage, root)
            else:
                reader = _fetch_torchvision(name, stage)
            write_manifest(stage / spec(name).folder, {"source": "real", "dataset": name, "reader": reader})
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
    download = stage / files.IMDB_ARCHIVE
    with (urllib.request.urlopen(files.IMDB_URL, timeout=files.DOWNLOAD_TIMEOUT_S) as response,
          open(download, "wb") as out):
        shutil.copyfileobj(response, out, 1 << 20)
    if archive_digests(download) != (files.IMDB_SHA256, files.IMDB_MD5):
        raise DataError(f"the archive downloaded from {files.IMDB_URL} does not match the SHA-256/MD5 of "
                        f"aclImdb_v1.tar.gz kept in code (damaged or replaced); nothing was changed under {root}")
    d = spec("imdb")
    with tarfile.open(download, "r:gz") as tar:
        try:
            checked = [member for member, _ in imdb_members(tar, d)]  # every member, before any is written
        except Malformed as exc:
            raise DataError(f"the archive from {files.IMDB_URL} {exc}; nothing was changed under {root}") from None
        tar.extractall(stage, members=checked, filter="data")  # the stdlib's own guard on top of ours
    download.rename(stage / d.folder / files.IMDB_ARCHIVE)
    return "pipelines.core.data.formats (aclImdb text files)"
