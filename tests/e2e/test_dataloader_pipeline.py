"""Chapter 5: the heavy 224 transform under each DataLoader setting, on CPU, with no worker left behind."""

import multiprocessing
import os
from pathlib import Path

import pytest
import torch

from conftest import accel
from pipelines import data_loading
from pipelines.core.harness import plan as planning, runner
from pipelines.core.config import experiments

# One arm per knob: none, pinning alone, workers, persistent workers, prefetch_factor.
ARMS = ("baseline", "pin", "w2", "w8-pin-persistent", "w8-pin-prefetch4")


def _children() -> list[int]:
    """Processes whose parent is this test process (DataLoader workers would be)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while listing
            continue
        if int(fields[1]) == os.getpid():
            out.append(int(stat.parent.name))
    return out


def test_transform_is_the_books_seven_steps_at_224():
    from PIL import Image

    transform = data_loading.heavy_transform()
    names = [type(step).__name__ for step in transform.transforms]
    assert names == ["Resize", "CenterCrop", "RandomHorizontalFlip", "RandomRotation", "GaussianBlur",
                     "ToTensor", "Normalize"]
    assert transform(Image.new("RGB", (32, 32))).shape == (3, 224, 224)


@pytest.mark.slow
def test_loader_variants_record_data_wait_and_leave_no_workers(tmp_path, data_root):
    entry = experiments.get("ch5-pipeline")
    plan = planning.plan(entry, "smoke", {"device": "cpu", "data_root": data_root, "results_dir": tmp_path}, {}, ARMS)
    outcome = runner.execute_plan(plan)
    assert not multiprocessing.active_children() and not _children()
    recs = {r["variant"]: r for r in outcome.records}
    assert set(recs) == set(ARMS)
    for name, rec in recs.items():
        cfg, metrics = rec["config"], rec["metrics"]
        assert rec["status"] == "ok" and cfg["image_size"] == 224 and cfg["device"] == "cpu"
        assert metrics["data_wait_s"] >= 0 and metrics["compute_s"] > 0 and metrics["measured_steps"] == 3
        pinned_note = any("pin_memory=True has no effect" in note for note in rec.get("notes", []))
        assert pinned_note == cfg["pin_memory"], name
    assert recs["w2"]["config"]["num_workers"] == 2
    assert recs["w8-pin-persistent"]["config"]["persistent_workers"] is True
    assert recs["w8-pin-prefetch4"]["config"]["prefetch_factor"] == 4


def test_negative_workers_is_a_usage_error(tmp_path, data_root):
    run = accel("run", "ch5-pipeline", "--scale", "smoke", "--device", "cpu", "--num-workers", "-1",
                "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 2 and "--num-workers must be 0 or more, got -1" in run.stderr
    assert "Traceback" not in run.stderr and not list(tmp_path.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the cuda default can run")
def test_gpu_target_refuses_on_cpu_and_names_the_cpu_flag(tmp_path, data_root):
    run = accel("run", "ch5-pipeline", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path))
    assert run.returncode == 3 and not list(tmp_path.iterdir()), run.stderr
    assert run.stderr.strip().splitlines() == [
        "accel: error: ch5-pipeline asks for --device cuda but no CUDA GPU is visible; run it on a GPU machine, or "
        "smoke-test its code path on CPU: accel run ch5-pipeline --device cpu --scale smoke"]
