"""Checkpoints: a file that is not one is refused in one line (never with advice to load it unsafely); a
writer killed mid-save, or a rotation cut short at any step, leaves the last marked checkpoint, which a
resume uses; two are kept; another run's checkpoint, or one no marker vouches for, is refused in one line
and left as it was. `accel run` meeting a hostile checkpoint at resume is end to end:
tests/e2e/test_refusal_paths.py."""

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from pipelines.core.train import checkpoint, loop, resume
from pipelines.core.errors import ConfigError, WriteError


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
checkpoint.keep(Path(sys.argv[1]), loop.Trainable(model, step=None, optimizer=None), 7, False, {})
"""


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_resume_ignores_a_save_killed_mid_write_and_the_next_save_removes_it(tmp_path):
    first = trainable()
    checkpoint.keep(tmp_path, first, 3, complete=False, manifest={})
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_SAVE, str(tmp_path)],
                            cwd=REPO, capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (stale,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert stale.name.startswith(f".{checkpoint.FILENAME}.")

    resumed = trainable()
    hooks = resume.CheckpointHooks(tmp_path, every=1, is_main=True)
    assert hooks.train_start(resumed, None) == 3  # the last complete checkpoint, not the half-written one
    assert "skipped" not in hooks.resumed  # the half-written file never became checkpoint.pt
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(),
                                                  resumed.model.state_dict().values()))
    hooks.epoch_end(3, 0.5)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))  # the stale temporary is gone
    assert checkpoint.load(tmp_path / checkpoint.FILENAME)["epoch"] == 4
    assert checkpoint.load(tmp_path / checkpoint.PREVIOUS)["epoch"] == 3  # two kept


def test_a_save_cut_short_at_any_point_of_its_rotation_leaves_the_one_before_it_resumable(tmp_path):
    """keep() renames the newest pair to PREVIOUS, writes the new file, then its marker. Stopped after any of
    those steps, the folder still resumes from a checkpoint a marker vouches for: epoch 2, or 3 once marked."""
    model = trainable()
    for step, expected in enumerate((2, 2, 2, 3)):
        folder = tmp_path / str(step)
        checkpoint.keep(folder, model, 1, complete=False, manifest={})
        checkpoint.keep(folder, model, 2, complete=False, manifest={})
        newest, previous = folder / checkpoint.FILENAME, folder / checkpoint.PREVIOUS
        os.replace(newest, previous)  # step 0: the newest file renamed, its marker not yet
        if step >= 1:
            os.replace(checkpoint.marker_of(newest), checkpoint.marker_of(previous))
        if step >= 2:
            checkpoint.save(newest, model, 3, complete=False)  # the new file, no marker yet
        if step >= 3:
            marked = {"sha256": checkpoint.sha256_of(newest), "saved_ns": 1 << 62}
            checkpoint.marker_of(newest).write_text(json.dumps(marked))
        assert resume.CheckpointHooks(folder, 1, True).train_start(trainable(), None) == expected, step


def test_a_checkpoint_of_another_run_or_with_no_marker_is_refused_in_one_line_and_kept(tmp_path):
    """Another run's unfinished checkpoint (another world size, arm, batch, configuration, torch) is refused,
    naming what differs; a checkpoint no marker vouches for is never read. Both leave the folder as it was. A
    finished run's checkpoint, whoever's, is nothing to resume: the run starts afresh."""
    here = {"experiment": "ch8-ddp-template", "arm": "ddp", "world_size": 4, "batch_size": 32, "config": "abc"}
    checkpoint.keep(tmp_path, trainable(), 1, complete=False, manifest={**here, "world_size": 2})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError) as caught:
        resume.CheckpointHooks(tmp_path, 1, True, manifest=here).train_start(trainable(), None)
    assert "is of another run (world_size 2 there, 4 here)" in str(caught.value) and "\n" not in str(caught.value)
    assert "-o checkpoint_any_world=true" in str(caught.value)  # the opt-in, named where only the world differs
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    hooks = resume.CheckpointHooks(tmp_path, 1, True, manifest=here, any_world=True)  # opted in: resumed
    assert hooks.train_start(trainable(), None) == 1 and hooks.resumed["world_size"] == 2
    data = {**here, "data": "real:50000:ab12"}  # the same run over other data (generated files, regenerated)
    other = tmp_path / "other-data"
    checkpoint.keep(other, trainable(), 1, complete=False, manifest={**data, "data": "generated:500:cd34"})
    with pytest.raises(ConfigError, match="is of another run .data 'generated:500:cd34' there, 'real:50000:ab12' "
                                          "here."):
        resume.CheckpointHooks(other, 1, True, manifest=data).train_start(trainable(), None)
    checkpoint.marker_of(tmp_path / checkpoint.FILENAME).unlink()
    with pytest.raises(ConfigError, match="has no marker that vouches for it"):
        resume.CheckpointHooks(tmp_path, 1, True, manifest=here).train_start(trainable(), None)
    checkpoint.keep(tmp_path, trainable(), 3, complete=True, manifest={**here, "arm": "other"})
    assert resume.CheckpointHooks(tmp_path, 1, True, manifest=here).train_start(trainable(), None) is None


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs: room for one checkpoint of a 100 x 100 Linear (about 41 KiB) and its marker, not two."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small tmpfs (a disk that fills) needs root and mount")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"a small tmpfs needs mount to work here: {done.stderr.strip() or done.returncode}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_disk_that_fills_during_a_save_keeps_the_checkpoint_before_it(small_disk):
    """The second save cannot fit: one line naming the file, the OS's reason and the checkpoint kept; no
    temporary is left, and a resume reads the first save, whole."""
    model = torch.nn.Linear(100, 100)
    first = loop.Trainable(model, step=None, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    checkpoint.keep(small_disk, first, 1, complete=False, manifest={})
    with pytest.raises(WriteError) as caught:
        checkpoint.keep(small_disk, first, 2, complete=False, manifest={})
    message = str(caught.value)
    assert "\n" not in message and "No space left on device" in message, message
    assert f"{small_disk / checkpoint.PREVIOUS}, is kept and resumable" in message
    assert not list(small_disk.glob(".*.tmp"))
    again = torch.nn.Linear(100, 100)
    resumed = loop.Trainable(again, step=None, optimizer=torch.optim.SGD(again.parameters(), lr=0.1))
    assert resume.CheckpointHooks(small_disk, 1, True).train_start(resumed, None) == 1
    assert torch.equal(again.weight, model.weight)


def test_a_corrupt_newest_checkpoint_is_skipped_and_the_resume_line_says_so(tmp_path, capsys):
    model = trainable()
    checkpoint.keep(tmp_path, model, 1, complete=False, manifest={})
    checkpoint.keep(tmp_path, model, 2, complete=False, manifest={})
    newest = tmp_path / checkpoint.FILENAME
    newest.write_bytes(newest.read_bytes()[:-10] + b"0123456789")  # its sha256 no longer matches its marker
    hooks = resume.CheckpointHooks(tmp_path, every=1, is_main=True)
    assert hooks.train_start(trainable(), None) == 1 and hooks.resumed["skipped"] == str(newest)
    said = capsys.readouterr()
    assert f"{newest} skipped: no marker vouches for it" in said.out + said.err


def test_a_checkpoint_of_another_configuration_is_refused_naming_the_fields_that_differ(tmp_path):
    from pipelines.core.config.runconfig import RunConfig

    def manifest(**extra):
        return checkpoint.identity(RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist",
                                             dataset="synthetic", batch_size=4, **extra), world_size=1)

    checkpoint.keep(tmp_path, trainable(), 1, complete=False, manifest=manifest(epochs=3, lr=0.01))
    with pytest.raises(ConfigError) as caught:
        resume.CheckpointHooks(tmp_path, 1, True, manifest=manifest(epochs=5, lr=0.01)).train_start(
            trainable(), None)
    assert "is of another run (epochs 3 there, 5 here)" in str(caught.value)
    assert resume.CheckpointHooks(tmp_path, 1, True, manifest=manifest(epochs=3, lr=0.01)).train_start(
        trainable(), None) == 1  # the same configuration resumes
