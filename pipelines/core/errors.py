"""The project's error types, in the lowest layer so every module can raise them without importing the
module that handles them. The CLI maps each type to one exit code and one line:

- ConfigError: a user-fixable mistake (bad value, missing data); exit 2, nothing written.
- NotRunnable: the experiment exists but cannot run here (planned, no GPU, wrong runtime); exit 3.
- DistError: a distributed run could not form or lost its group; exit 1.
- WriteError: a file could not be written mid-run (disk full, folder removed); exit 1, one line.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A user-fixable configuration mistake; the CLI prints it as one line and exits 2."""


class NotRunnable(ConfigError):
    """The experiment exists but cannot run here (planned, or a capability is missing); exit 3."""


class DistError(RuntimeError):
    """A distributed failure (a peer missing or lost): one clear line naming ranks and addresses."""


class WriteError(RuntimeError):
    """A result, checkpoint or report file could not be written (ENOSPC, EROFS, ...): one line naming the
    file and the OS's reason; the half-written temporary is already gone (core/record/atomic.py)."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (C++ errors carry stack frames after it)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else exc.__class__.__name__)[:limit]
