"""Checkpoints: a file that is not one is refused in one line (never with advice to load it unsafely),
and a writer killed mid-save leaves the last complete checkpoint, which a resume uses. `accel run` meeting
a hostile checkpoint at resume is end to end: tests/e2e/test_refusal_paths.py."""

import os
import pickle
import signal
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from pipelines.core.train import checkpoint, loop
from pipelines.core.errors import ConfigError


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def trainable():
    model = torch.nn.Linear(4, 2)
    return loop.Trainable(model, step=None, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


BAD = {
    "code-running torch.save": (lambda path, marker: torch.save({"model": RunsCode(marker)}, path),
                                "unsupported GLOBAL posix.system"),
    "code-running pickle": (lambda path, marker: path.write_bytes(pickle.dumps(RunsCode(marker))),
                            "Unsupported operand"),
    "not a checkpoint": (lambda path, marker: path.write_bytes(b"not a checkpoint"), "cannot be loaded"),
    "empty": (lambda path, marker: path.write_bytes(b""), "empty or truncated"),
    "truncated": (lambda path, marker: path.write_bytes(_complete_bytes(path)[:300]), "zip archive"),
    "a tensor, not a checkpoint": (lambda path, marker: torch.save(torch.ones(2), path), "not a checkpoint"),
}


def _complete_bytes(path):
    checkpoint.save(path, trainable(), 1, complete=False)
    return path.read_bytes()


@pytest.mark.parametrize("case", BAD)
def test_load_refuses_in_one_line_naming_the_file(tmp_path, case):
    make, needle = BAD[case]
    path, marker = tmp_path / checkpoint.FILENAME, tmp_path / "ran"
    make(path, marker)
    with pytest.raises(ConfigError) as caught:
        checkpoint.load(path)
    message = str(caught.value)
    assert str(path) in message and needle in message and "\n" not in message
    assert "weights_only" not in message and not marker.exists()


KILLED_MID_SAVE = """
import os, signal, sys, torch
from pathlib import Path
from pipelines.core.train import checkpoint, loop

def dies_mid_write(state, handle):
    handle.write(b"PK\\x03\\x04 half a checkpoint")
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.save = dies_mid_write
model = torch.nn.Linear(4, 2)
checkpoint.save(Path(sys.argv[1]), loop.Trainable(model, step=None, optimizer=None), 7, complete=False)
"""


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_resume_ignores_a_save_killed_mid_write_and_the_next_save_removes_it(tmp_path):
    first = trainable()
    checkpoint.save(tmp_path / checkpoint.FILENAME, first, 3, complete=False)
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_SAVE, str(tmp_path / checkpoint.FILENAME)],
                            cwd=REPO, capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (stale,) = [p for p in tmp_path.iterdir() if p.name != checkpoint.FILENAME]
    assert stale.name.startswith(f".{checkpoint.FILENAME}.") and stale.name.endswith(".tmp")

    resumed = trainable()
    hooks = checkpoint.CheckpointHooks(tmp_path, every=1, is_main=True)
    assert hooks.train_start(resumed, None) == 3  # the last complete checkpoint, not the half-written one
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(),
                                                  resumed.model.state_dict().values()))
    hooks.epoch_end(3, 0.5)
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.FILENAME]  # the stale temporary is gone
    assert checkpoint.load(tmp_path / checkpoint.FILENAME)["epoch"] == 4
