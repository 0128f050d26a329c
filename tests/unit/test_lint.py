"""`make lint` passes: ruff finds no syntax error (E9), no pyflakes error (F) and no line over pyproject.toml's
line length (E501) in pipelines, tests and ci. The same command as the Makefile's `lint` target, which
`make test` runs first; ruff comes with the test extra (pyproject.toml)."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

ARGS = ["check", "pipelines", "tests", "ci", "backends", "--select", "E501,F,E9"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_makefile_lints_with_this_selection(tmp_path):
    """`make -n lint` (what it would run, against a venv that is not there, so every step shows): its one
    ruff command is the venv's ruff with exactly this selection."""
    venv = tmp_path / "venv"
    run = subprocess.run(["make", "-n", "--no-print-directory", "lint", f"VENV={venv}"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    ruff = [shlex.split(line) for line in run.stdout.splitlines() if "ruff" in line and not line.startswith("#")]
    assert ruff == [[f"{venv}/bin/ruff", *ARGS]], run.stdout


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (it comes with the test extra: make venv)")
def test_ruff_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", *ARGS, "--output-format", "concise", "--no-cache"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
