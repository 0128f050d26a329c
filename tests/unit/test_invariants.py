"""The gate for a machine class with no reference of its own (report/invariants.py): an arm's direction
against its baseline, where every committed reference agrees on it, must not reverse. Checked on the
committed references, and on a copy of one in which two arms' records trade names (an injected reversal)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.core.config.arm import Arm
from pipelines.core.report import invariants
from pipelines.core.stats import rows as stats_rows
from pipelines.core.record.results import load

REPO = Path(__file__).resolve().parents[2]
REFERENCES = REPO / "results/reference"
ZEN4 = REFERENCES / "cpu-2core-amd-f25m17-bench"
OTHERS = [REFERENCES / "cpu-2core-bench", REFERENCES / "cpu-2core-amd-f26m2-bench"]


@pytest.fixture(scope="module")
def checked():
    return invariants.invariants(OTHERS)


def test_the_directions_every_committed_class_agrees_on(checked):
    found = {(inv.arm, inv.faster) for inv in checked}
    assert (Arm("ch6-prune", "s80"), True) in found and (Arm("ch9-cpu-threads", "threads=2"), True) in found
    assert all(len(inv.references) == len(OTHERS) for inv in checked)
    assert not invariants.broken(stats_rows.build(load(ZEN4)), checked)  # the Zen 4 run keeps them


def swapped_copy(tmp_path: Path, a: str, b: str) -> Path:
    """The Zen 4 reference with chapter 6's arms `a` and `b` trading names: b's records now say a."""
    run = tmp_path / "run"
    shutil.copytree(ZEN4, run)
    for path in run.glob("ch6-prune--*.jsonl"):
        lines = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            name = {a: b, b: a}.get(record["variant"], record["variant"])
            record["variant"] = record["config"]["variant"] = name
            lines.append(json.dumps(record))
        path.write_text("\n".join(lines) + "\n")
    return run


def test_an_injected_reversal_breaks_its_invariant_and_the_gate_exits_1(tmp_path):
    run = swapped_copy(tmp_path, "unpruned", "s80")
    done = subprocess.run([sys.executable, "-m", "pipelines.core.report.invariants", str(run), *map(str, OTHERS)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ch6-prune [s80] faster than its baseline (2 references): checked" in done.stdout
    assert "invariants: BROKEN ch6-prune [s80]" in done.stdout and "cpu-2core-amd-f26m2-bench" in done.stdout


def test_the_gate_passes_the_committed_run_and_names_what_it_checked():
    done = subprocess.run([sys.executable, "-m", "pipelines.core.report.invariants", str(ZEN4), *map(str, OTHERS)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "invariants: none broken" in done.stdout and ": checked" in done.stdout
