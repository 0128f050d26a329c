"""Refusals found only once a real run is under way (moved from tests/refusals: each starts a training run
in a real `accel` process, so it is end to end and slow): a failure mid-run leaves its error record, and a
hostile checkpoint met at resume is one line and runs nothing."""

import os

import pytest
import torch

from conftest import accel, assert_refused, records
from pipelines.core.train import checkpoint


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.slow
def test_runtime_failure_writes_an_error_record(tmp_path, data_root):
    """A failure after work started (here: 3-channel CIFAR images into the 1-channel CNN) leaves an
    error record, so a report shows the hole; the traceback is kept because this is not a typo."""
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path), "--dataset", "cifar10")
    assert run.returncode == 1 and "Traceback" in run.stderr
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["type"] == "RuntimeError"
    assert record["config"]["dataset"] == "cifar10" and record["env"]["torch"]


@pytest.mark.slow
def test_accel_run_with_a_hostile_checkpoint_is_one_line_and_runs_nothing(tmp_path, data_root):
    folder, marker = tmp_path / "ckpt", tmp_path / "ran"
    folder.mkdir()
    torch.save({"model": RunsCode(marker), "epoch": 1, "rng": {}}, folder / checkpoint.FILENAME)
    # no marker vouches for it (a forged one would name another run): refused before it is ever unpickled
    assert_refused(["run", "ch8-ddp-template", "--scale", "smoke", "-o", f"checkpoint_dir={folder}"], 2,
                   f"checkpoint {folder / checkpoint.FILENAME} has no marker that vouches for it", tmp_path / "r",
                   data_root)
    assert not marker.exists()
