"""Docs that cannot go stale silently: every file path and every dotted code reference that the README, docs/,
tests/README.md, the docstrings and comments of pipelines/, and the comments of launch/, ci/ and the Makefile
name must exist. A file path resolves from the repository, from pipelines/ or pipelines/core/ (the rooms'
own shorthand: `stats/rows.py`), or from the naming file's folder. A dotted reference in backticks whose first
word is a room of pipelines/core (`stats.intervals.ratio_interval`, `harness.refusals`) must import and
resolve attribute by attribute. A record's fields are written the same way (`metrics.fault_burst_blocks`,
`dist.ccl`); those prefixes are fields, unless a capitalized word marks a class (`dist.Session` is code).
The README's links have their own test (test_readme.py)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = (REPO, REPO / "pipelines", REPO / "pipelines" / "core")
# outputs a command writes, and the example a design page builds, named on purpose
NOT_IN_THE_TREE = {"results/report.md", "pipelines/label_smoothing.py"}
PATH = re.compile(r"(?<![\w./<-])((?:[\w.-]+/)+[\w-]+(?:\.[\w-]+)*\.(?:py|sh|md|toml|lock|yml|yaml|def|in|cpp))\b")
ROOMS = ("harness", "stats", "report", "record", "train", "distributed", "config", "data", "cli", "catalog",
         "dist", "run", "spec")  # the last three: rooms that no longer exist, so a reference to one fails
RECORD_FIELDS = ("metrics", "env", "dist", "config", "pairing", "stopping")
DOTTED = re.compile(rf"`((?:pipelines\.)?(?:core\.)?(?:{'|'.join(ROOMS + RECORD_FIELDS)})(?:\.[A-Za-z_]\w*)+)`")


def texts() -> list[tuple[Path, str]]:
    """(file, the prose it holds): whole Markdown pages; docstrings and comments of the Python package;
    comment lines of the shell scripts and the Makefile."""
    out = [(p, p.read_text()) for p in (REPO / "README.md", REPO / "tests" / "README.md",
                                          *sorted((REPO / "docs").glob("*.md")))]
    for path in sorted((REPO / "pipelines").rglob("*.py")):
        source = path.read_text()
        nodes = [n for n in ast.walk(ast.parse(source))
                 if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        docs = [ast.get_docstring(n) or "" for n in nodes]
        comments = [line.split("#", 1)[1] for line in source.splitlines() if "#" in line]
        out.append((path, "\n".join(docs + comments)))
    for path in (*sorted((REPO / "launch").glob("*.sh")), *sorted((REPO / "ci").glob("*.sh")), REPO / "Makefile"):
        out.append((path, "\n".join(line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line)))
    return out


def missing_paths(path: Path, text: str) -> list[str]:
    return [ref for ref in PATH.findall(text) if ref not in NOT_IN_THE_TREE
            and not any((root / ref).exists() for root in (*ROOTS, path.parent))]


FILE_NAMES = ("md", "csv", "html", "json", "jsonl", "png", "py", "sh")  # report.md is a file, not a reference


def resolves(reference: str) -> bool:
    """Whether a dotted reference names a module of pipelines.core and attributes that exist (or is a record's
    field: `metrics.x`, `dist.ccl`, `config.stand_in`; a capitalized word is a class, so code)."""
    words = reference.split(".")
    if words[-1] in FILE_NAMES:
        return True
    field = words[0] in RECORD_FIELDS and not any(w[:1].isupper() for w in words)
    if field and words[0] not in ROOMS:
        return True
    words = [w for w in words if w not in ("pipelines", "core")]
    for cut in range(len(words), 0, -1):
        try:
            obj = importlib.import_module("pipelines.core." + ".".join(words[:cut]))
        except ImportError:
            continue
        for attr in words[cut:]:
            if not hasattr(obj, attr):
                return field
            obj = getattr(obj, attr)
        return True
    return field


def missing_references(text: str) -> list[str]:
    return [ref for ref in DOTTED.findall(text) if not resolves(ref)]


def test_every_named_file_exists():
    stale = [f"{path.relative_to(REPO)}: {ref}" for path, text in texts() for ref in missing_paths(path, text)]
    assert not stale, "\n".join(stale)


def test_every_named_module_and_function_exists():
    stale = [f"{path.relative_to(REPO)}: {ref}" for path, text in texts() for ref in missing_references(text)]
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("text, stale", [
    ("the interval is `stats.intervals.ratio_interval`'s", []),
    ("the interval is `stats.intervals.ratio_intervals`'s", ["stats.intervals.ratio_intervals"]),  # renamed
    ("`stats_rows` once; `stats.rowz.build` now", ["stats.rowz.build"]),  # a module renamed
    ("a record's `metrics.fault_burst_blocks` and `dist.ccl`", []),  # fields
    ("`dist.Session.abort` ends the ranks", ["dist.Session.abort"]),  # the room is distributed/ now
])
def test_the_checker_fails_on_a_renamed_module_or_function(text, stale):
    assert missing_references(text) == stale
    assert missing_paths(REPO, "see core/stats/rowz.py and stats/rows.py") == ["core/stats/rowz.py"]
