"""The test index in tests/README.md (which test files import each module of pipelines/) is what
ci/update-test-index.py generates from today's test files, held once between its markers; the scanner
counts an import at module level and inside a function, by either import form, and only modules of
pipelines/. All in-process: the script is loaded as a module and its block regenerated in memory."""

from __future__ import annotations

import importlib.util

from conftest import REPO

README = REPO / "tests" / "README.md"
START, END = "<!-- test-index:start", "<!-- test-index:end -->"


def generator():
    spec = importlib.util.spec_from_file_location("update_test_index", REPO / "ci" / "update-test-index.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_test_index_in_tests_readme_is_up_to_date():
    text = README.read_text()
    assert text.count(START) == 1 and text.count(END) == 1, "tests/README.md must hold the test-index markers once"
    block = text.split(START, 1)[1].split("\n", 1)[1].split(END, 1)[0].strip()
    assert block == generator().index_markdown(), ("tests/README.md's test index is stale: "
                                                   "run .venv/bin/python ci/update-test-index.py")


def test_the_index_has_one_row_per_module_and_names_real_test_files():
    script = generator()
    known = script.modules()
    rows = script.index_markdown().splitlines()[2:]
    assert len(rows) == len(known) and "pipelines.core.stats.rows" in known and "pipelines.catalog.talk" in known
    assert not [name for name in known if name.endswith(("__init__", "__main__"))]
    for row in rows:
        module, users = row.strip("| ").split(" | ")
        assert (REPO / module.strip("`")).is_file(), row
        assert users == "-" or all((REPO / "tests" / user).is_file() for user in users.split(", ")), row


def test_the_scanner_counts_every_import_form_at_any_depth():
    known = generator().modules()
    source = (
        "import os\n"
        "import pipelines.core.stats.intervals\n"
        "from pipelines.core.stats import rows as stats_rows\n"
        "from pipelines.core.errors import ConfigError\n"
        "def later():\n"
        "    from pipelines import onnx_export\n"
        "    from pipelines.core.distributed import agent, placement\n"
        "from pipelines.core.report import *\n"
    )
    assert generator().imported(source, known) == {
        "pipelines.core.stats.intervals", "pipelines.core.stats.rows", "pipelines.core.errors",
        "pipelines.onnx_export", "pipelines.core.distributed.agent", "pipelines.core.distributed.placement"}
