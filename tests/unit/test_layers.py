"""The house plan holds: pipelines/core is in rooms whose imports only go down, no technique file imports
another, the library names no technique file, and nothing imports in a circle.

Imports are read with `ast` from every module under pipelines/, those inside functions too (the CLI
imports lazily on purpose). The only way up is a dynamic load by name, and there are exactly two: the
catalog's modules (config/experiments.py loads pipelines.catalog.*, which import the catalog types) and
the technique file an entry names (harness/plan.py loads pipelines.<name>). One more dynamic load goes
sideways, within a room: stats/bases loads every module of its own package (the verdict bases).
"""

from __future__ import annotations

import ast
import importlib.util
from collections import defaultdict
from pathlib import Path

from conftest import REPO

ROOMS = ["errors", "config", "record", "stats", "train", "data", "distributed", "harness", "report", "cli"]
CORE = REPO / "pipelines" / "core"
MAX_TOP_LEVEL_MODULES = 8


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


MODULES = {module_name(p): p for p in (REPO / "pipelines").rglob("*.py")}


def _scanner():
    """ci/update-test-index.py's import scanner: the one reading of which pipelines modules a file imports."""
    spec = importlib.util.spec_from_file_location("update_test_index", REPO / "ci" / "update-test-index.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


SCANNER = _scanner()


def imports(path: Path) -> set[str]:
    """Every pipelines.* module this file imports (`from a import b` counts a.b when b is a module)."""
    return SCANNER.imported(path.read_text(), MODULES, str(path))


EDGES = {name: imports(path) - {name} for name, path in MODULES.items()}


def room(name: str) -> str | None:
    """The room of a pipelines.core module: its sub-package, or "errors" for the top-level modules."""
    parts = name.split(".")
    if parts[:2] != ["pipelines", "core"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in ROOMS and len(parts) > 3 else "errors"


def is_technique(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 2 and parts[0] == "pipelines" and parts[1] not in ("__main__", "core", "catalog")


def test_core_imports_only_go_down_the_rooms():
    upward = [f"{name} ({room(name)}) imports {target} ({room(target)})"
              for name, targets in EDGES.items() if room(name)
              for target in targets if room(target) and ROOMS.index(room(target)) > ROOMS.index(room(name))]
    assert not upward, "imports up the layers (order: " + " < ".join(ROOMS) + "):\n" + "\n".join(upward)


def test_the_library_imports_no_technique_file_and_no_catalog_module():
    wrong = [f"{name} imports {target}" for name, targets in EDGES.items() if room(name)
             for target in targets if not room(target) and target != "pipelines"]
    assert not wrong, "\n".join(wrong)


def test_no_technique_file_imports_another():
    crossing = [f"{name} imports {target}" for name, targets in EDGES.items() if is_technique(name)
                for target in targets if is_technique(target)]
    assert not crossing, "shared pieces belong in pipelines/core:\n" + "\n".join(crossing)


def test_no_import_cycle_under_pipelines():
    """Every `pipelines` import, module-level or inside a function, forms a DAG."""
    graph: dict[str, set[str]] = defaultdict(set, EDGES)
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in graph[name]:
            assert state.get(target) != 1, "import cycle: " + " -> ".join(path + [name, target])
            if target not in state:
                visit(target, path + [name])
        state[name] = 2

    for name in MODULES:
        if name not in state:
            visit(name, [])


def test_core_has_its_rooms_and_few_top_level_modules():
    top = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    rooms = sorted(p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert rooms == sorted(ROOMS[1:])
    for name in rooms:  # every room says what lives there and what it may import
        doc = ast.get_docstring(ast.parse((CORE / name / "__init__.py").read_text())) or ""
        assert "may import" in doc, f"pipelines/core/{name}/__init__.py: say what the room may import"


def test_the_three_dynamic_loads_are_the_ones_this_file_names():
    """The technique files (by the catalog's pipeline= field, twice) and the verdict bases (every module of their
    own package, in the stats room): a dynamic load hides an edge from the graph above, so each is named."""
    loads = sorted(module_name(p) for p in CORE.rglob("*.py") if "import_module(" in p.read_text())
    assert loads == ["pipelines.core.config.experiments", "pipelines.core.harness.plan", "pipelines.core.stats.bases"]


def test_no_module_under_pipelines_is_over_300_lines():
    """A module that grows past 300 lines holds more than one job: split it (there is no exception)."""
    long = [f"{path.relative_to(REPO)}: {path.read_text().count(chr(10))}"
            for path in sorted((REPO / "pipelines").rglob("*.py")) if path.read_text().count("\n") > 300]
    assert not long, f"over 300 lines: {long}"
