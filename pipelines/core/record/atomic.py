"""One atomic file writer: a reader sees the old file or the whole new one, never half of it.

The bytes go to a hidden temporary file in the target's own folder (same filesystem, so the rename
is atomic), are flushed and fsynced, and the file is renamed into place. The file gets the mode the
process's umask gives a new file (0666 & ~umask), not `mkstemp`'s 0600, so results written on a
cluster stay readable by the group. Temporaries have a recognisable name (`.NAME.*.tmp`): one left by
a process killed mid-write is removed by the next write to the same path (`remove_stale`). A write that
fails (disk full, folder gone) leaves no temporary and raises WriteError naming the file.

`check_folder` is the up-front half: before any work, it proves a folder can take files (it may not exist
yet) without leaving anything behind, so a bad path is refused in one line instead of after training.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Callable

from pipelines.core.errors import ConfigError, WriteError

TMP_SUFFIX = ".tmp"
MIN_FREE_BYTES = 1 << 20  # results, checkpoints and reports of a smoke run fit; a full disk does not


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


class _Recording:
    """The handle `fill` writes to: it keeps the first OSError of a write, which some serializers swallow
    (torch.save reports a full disk as an 'unexpected pos' RuntimeError), so the real reason is reported."""

    def __init__(self, handle: IO) -> None:
        self.handle, self.error = handle, None

    def write(self, data):
        try:
            return self.handle.write(data)
        except OSError as exc:
            self.error = self.error or exc
            raise

    def __getattr__(self, name: str):
        return getattr(self.handle, name)


def write(path: Path, fill: Callable[[IO], None], binary: bool = False) -> Path:
    """Write `path` atomically: `fill(handle)` writes the content into a temporary that is renamed."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            recorder = _Recording(handle)
            try:
                fill(recorder)
            except Exception as exc:  # a serializer (torch.save) may turn the OS's ENOSPC into its own error
                if recorder.error is None:
                    raise
                raise recorder.error from exc
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise WriteError(f"could not write {path} ({exc.strerror or exc})") from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)  # gone after the rename; removed after a failure
    return path


def write_text(path: Path, text: str) -> Path:
    return write(path, lambda handle: handle.write(text))


def check_folder(folder: Path, label: str, fix: str, need_bytes: int = MIN_FREE_BYTES) -> None:
    """ConfigError unless files can be created in `folder` (existing or not) with `need_bytes` free.

    The probe is real (a temporary folder made and removed in the nearest existing ancestor), because
    permission bits lie for root and for /proc, /sys and read-only mounts. Nothing is left behind."""
    folder = Path(folder)
    existing = folder
    while not existing.is_dir():
        if existing.exists() or existing.is_symlink():
            raise ConfigError(f"{label} {folder} is not writable ({existing} is a file, not a folder); {fix}")
        existing = existing.parent
    try:
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".accel-probe-"))
        free = shutil.disk_usage(existing).free
    except OSError as exc:
        raise ConfigError(f"{label} {folder} is not writable ({exc.strerror or exc}); {fix}") from None
    if free < need_bytes:
        raise ConfigError(f"{label} {folder} has {free // 1024} KiB free, less than the "
                          f"{need_bytes // 1024} KiB a run needs; free space there or {fix}")
