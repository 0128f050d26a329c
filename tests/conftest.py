"""Shared fixtures: generated datasets in their real on-disk formats, and a real `accel` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def accel(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the real CLI in a fresh interpreter, as a user would."""
    return subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def records(results_dir: Path) -> list[dict]:
    out = []
    for path in sorted(Path(results_dir).glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """Generated Fashion-MNIST and CIFAR-10 (torchvision's on-disk formats) and IMDB (aclImdb's), small."""
    from pipelines.core.data import generator

    root = tmp_path_factory.mktemp("data")
    generator.generate("fashion_mnist", root, train=600, test=200, seed=0)
    generator.generate("cifar10", root, train=500, test=200, seed=0)
    generator.generate("imdb", root, train=240, test=80, seed=0)
    return root


@pytest.fixture
def results_dir(tmp_path) -> Path:
    return tmp_path / "results"


def without_plan(stderr: str) -> list[str]:
    """stderr's lines after the plan block a run prints before work (`plan: ...` and its indented lines): a
    mistake found only while working (a hostile checkpoint at resume, a batch that does not fit) follows it."""
    return [line for line in stderr.strip().splitlines() if not line.startswith(("plan: ", "  "))]


def assert_refused(args, code: int, needle: str, results_dir: Path, data_root: Path) -> None:
    """A refused run: the exit code, one `accel: error:` line naming the problem, no traceback, no result."""
    run = accel(*args, "--data-root", str(data_root), "--results-dir", str(results_dir))
    lines = without_plan(run.stderr)
    assert run.returncode == code and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert needle in lines[0] and "Traceback" not in run.stderr
    assert not results_dir.exists() or not list(results_dir.iterdir())
