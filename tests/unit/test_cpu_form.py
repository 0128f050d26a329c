"""A GPU entry asked to run on CPU runs its declared CPU form, says so, and is never judged against the GPU
figure (planned as the GPU entry, ch7-amp --device cpu would be EfficientNet-B7 at batch 2048, 7.3 hours)."""

from __future__ import annotations

import os

from conftest import accel
from pipelines.core.harness import plan as planning
from pipelines.core.config import experiments


def configs(overrides, scale="bench"):
    return planning.plan(experiments.get("ch7-amp"), scale, overrides, {}, ("fp32", "bf16")).configs


def test_device_cpu_takes_the_declared_cpu_form_with_workers_and_pinning_that_fit_the_machine():
    usable = len(os.sched_getaffinity(0))
    for cfg in configs({"device": "cpu"}):
        assert (cfg.model, cfg.batch_size, cfg.pin_memory) == ("efficientnet_b0", 64, False)
        assert cfg.num_workers == min(4, usable // 4)
        assert cfg.stand_in.startswith("CPU form of a GPU entry: model efficientnet_b0, batch_size 64 stands in "
                                       "for the published model efficientnet_b7, batch_size 2048")


def test_the_user_s_own_flags_win_and_other_runs_keep_the_published_workload():
    assert {c.batch_size for c in configs({"device": "cpu", "batch_size": 16})} == {16}
    assert {(c.model, c.batch_size, c.stand_in) for c in configs({})} == {("efficientnet_b7", 2048, "")}
    assert {c.stand_in for c in configs({"device": "cpu"}, scale="smoke")} == {""}  # smoke has its own size


def test_the_dry_run_plans_the_cpu_form_in_minutes():
    run = accel("run", "ch7-amp", "--device", "cpu", "--variant", "fp32", "--variant", "bf16", "--dry-run",
                "--results-dir", "/nonexistent-results")
    assert run.returncode == 0, run.stderr
    assert "workload:  CPU form of a GPU entry: model efficientnet_b0, batch_size 64" in run.stdout
    assert "batch 64" in run.stdout and "REFUSED" not in run.stdout + run.stderr
