"""Dataset files on disk, the reading side: the dataset specs, verify, read (`fetch` and the lock it writes
under are data/writing.py's; the generator is data/generator.py).

Data never executes code, and no file is trusted because of another file beside it:
- Every file a loader uses is parsed by data/formats.py's checked readers through `load_split` here: IDX
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

import gzip
import hashlib
import json
import re
import tarfile
from pathlib import Path, PurePosixPath
from typing import Iterator


from pipelines.core.errors import ConfigError
from pipelines.core.data.formats import (CIFAR_BATCHES, IMDB_GLOBS, DatasetFiles,
                                        Malformed, Split, TextSplit, Unreadable, read_split)

MANIFEST = "accel-checksums.sha256"
ORIGIN = "accel-origin.json"
SOURCES = ("real", "generated")

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


def present(name: str, root: Path) -> bool:
    """Whether every file the reader opens is there (no digest, no format check: what a plan can say
    in a moment; `verify` is the run's own check)."""
    folder = Path(root) / spec(name).folder
    if not folder.is_dir():
        return False
    names = reader_files(name, folder)
    return bool(names) and all((folder / filename).is_file() for filename in names)


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


def archive_digests(path: Path) -> tuple[str, str]:
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
    if archive_digests(path) != (IMDB_SHA256, IMDB_MD5):
        raise _damaged(path, "does not match the SHA-256/MD5 of aclImdb_v1.tar.gz kept in code", name, root)


def imdb_members(tar: tarfile.TarFile, d: DatasetFiles) -> Iterator[tuple[tarfile.TarInfo, str | None]]:
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
            for member, relative in imdb_members(tar, spec(name)):
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
