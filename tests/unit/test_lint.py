"""`make lint` passes: ruff finds no syntax error (E9), no pyflakes error (F) and no line over pyproject.toml's
line length (E501) in pipelines, tests and ci. The same command as the Makefile's `lint` target, which
`make test` runs first; ruff comes with the test extra (pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import REPO

ARGS = ["check", "pipelines", "tests", "ci", "backends", "--select", "E501,F,E9"]


def test_the_makefile_lints_with_this_selection():
    assert f"ruff {' '.join(ARGS)}" in (REPO / "Makefile").read_text()


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (it comes with the test extra: make venv)")
def test_ruff_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", *ARGS, "--output-format", "concise", "--no-cache"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
