"""One atomic file writer: a reader sees the old file or the whole new one, never half of it.

The bytes go to a hidden temporary file in the target's own folder (same filesystem, so the rename
is atomic), are flushed and fsynced, and the file is renamed into place. The file gets the mode the
process's umask gives a new file (0666 & ~umask), not `mkstemp`'s 0600, so results written on a
cluster stay readable by the group. Temporaries have a recognisable name (`.NAME.*.tmp`): one left by
a process killed mid-write is removed by the next write to the same path (`remove_stale`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Callable

TMP_SUFFIX = ".tmp"


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def file_mode() -> int:
    """The mode a plain `open(path, "w")` would give a new file under this process's umask."""
    return 0o666 & ~_umask()


def remove_stale(path: Path) -> list[Path]:
    """Delete temporaries of `path` left by a killed writer; returns what was removed."""
    path = Path(path)
    removed = []
    for leftover in path.parent.glob(f".{path.name}.*{TMP_SUFFIX}"):
        try:
            leftover.unlink()
            removed.append(leftover)
        except FileNotFoundError:
            pass  # another process cleaned it up first
    return removed


def write(path: Path, fill: Callable[[IO], None], binary: bool = False) -> Path:
    """Write `path` atomically: `fill(handle)` writes the content into a temporary that is renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)  # gone after the rename; removed after a failure
    return path


def write_text(path: Path, text: str) -> Path:
    return write(path, lambda handle: handle.write(text))
