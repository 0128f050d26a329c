"""What code is running: the package version and, in a git checkout, the commit (`accel --version`, and
every record's fingerprint). Standard library only, so `accel --version` answers without loading torch."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

DISTRIBUTION = "accel-pipelines"  # pyproject.toml's [project] name
REPO = Path(__file__).resolve().parents[3]  # pipelines/core/record/version.py -> the checkout


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # a checkout used without `pip install -e .`
        return "unknown"


def git_commit(root: Path = REPO) -> dict[str, Any]:
    """{"git_commit": full hash or None outside a checkout, "git_dirty": tracked files modified}. Files under
    results/ do not count: they are what runs write (a reference run replaces its own committed records
    while it measures), not the code that ran."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                     "--", ".", ":(exclude)results"],
                                    capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty if commit else None}


def text() -> str:
    """'accel 0.1.0 (commit abc1234)', '+dirty' when tracked files differ from it, no commit outside git."""
    found = git_commit()
    commit = found["git_commit"]
    where = f" (commit {commit[:7]}{'+dirty' if found['git_dirty'] else ''})" if commit else ""
    return f"accel {package_version()}{where}"
