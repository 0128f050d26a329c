"""Rewrite the test index in tests/README.md: one row per module of pipelines/, with the test files that import it.

Every .py file under tests/ is read with `ast` (the test files of each folder and the helper modules beside
them, such as tests/recordutil.py). An import statement anywhere in a file, at module level or inside a
function, counts: `import pipelines.core.stats.rows`, `from pipelines.core.stats import rows` and
`from pipelines.core.stats.rows import Row` all name pipelines/core/stats/rows.py. A module that no test file
imports gets "-": the tests reach it through the CLI or an end-to-end run. Every .py under pipelines/ is a
row except __init__.py and __main__.py (the catalog's modules included).

tests/unit/test_test_index.py checks the block is in sync. Run: .venv/bin/python ci/update-test-index.py
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "tests" / "README.md"
BLOCK = re.compile(r"(<!-- test-index:start[^\n]*-->\n)(?:.*?\n)?(<!-- test-index:end -->)", re.S)


def modules(repo: Path = REPO) -> dict[str, Path]:
    """Dotted name -> path (relative to the repository) of every module under pipelines/."""
    out = {}
    for path in sorted((repo / "pipelines").rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py") and "__pycache__" not in path.parts:
            rel = path.relative_to(repo)
            out[".".join(rel.with_suffix("").parts)] = rel
    return out


def imported(source: str, known: set[str] | dict[str, Path], filename: str = "<test>") -> set[str]:
    """The modules of `known` that an import statement anywhere in `source` names."""
    names = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name in known}


def test_files(repo: Path = REPO) -> list[Path]:
    """Every Python file under tests/, relative to tests/."""
    root = repo / "tests"
    return sorted(p.relative_to(root) for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def index_markdown(repo: Path = REPO) -> str:
    """The table: one line per module of pipelines/, its importing test files sorted, "-" for none."""
    known = modules(repo)
    users: dict[str, list[str]] = {name: [] for name in known}
    for rel in test_files(repo):
        path = repo / "tests" / rel
        for name in imported(path.read_text(), known, str(path)):
            users[name].append(rel.as_posix())
    lines = ["| module | test files that import it (under tests/) |", "|---|---|"]
    for name, path in sorted(known.items(), key=lambda item: item[1].as_posix()):
        lines.append(f"| `{path.as_posix()}` | {', '.join(sorted(users[name])) or '-'} |")
    return "\n".join(lines)


def main() -> None:
    text = README.read_text()
    if len(BLOCK.findall(text)) != 1:
        sys.exit(f"{README.relative_to(REPO)} must hold the test-index markers exactly once")
    README.write_text(BLOCK.sub(lambda m: m.group(1) + index_markdown() + "\n" + m.group(2), text))


if __name__ == "__main__":
    main()
