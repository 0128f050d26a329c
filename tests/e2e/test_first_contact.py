"""First contact: bench scale by default, a plan before any work (`--dry-run`: only the plan), the baseline
entry measured beside the entry, and the verdict as the last thing every experiment command prints."""

from __future__ import annotations

import json
import os
import re

import pytest

from distutil import check_one_orchestrator, counting_starts, starts_in
from conftest import accel, records
from pipelines.core.distributed import launchers
from pipelines.core.harness import preview
from pipelines.core.harness.estimate import estimate
from pipelines.core.config import experiments
from pipelines.core.config.runconfig import SCALE_DEFAULTS, RunConfig


def test_dry_run_names_bench_scale_the_baseline_the_arms_and_an_estimate_and_writes_nothing(tmp_path):
    out = accel("run", "ch2-nobias", "--dry-run", "--results-dir", str(tmp_path / "r"), timeout=120)
    assert out.returncode == 0, out.stderr
    plan = out.stdout
    assert plan.startswith("plan: ch2-nobias with its baseline ch2-baseline, in rounds of processes")
    assert "bench scale: 5 warm-up steps, then at least 12 blocks of about 0.5 s per arm" in plan  # the default
    assert "ch2-baseline [baseline]  baseline of ch2-nobias" in plan
    assert "ch2-nobias [nobias]      vs ch2-baseline" in plan
    assert "estimate:" in plan and "rounds:    auto" in plan and "usable core" in plan
    assert "sharing:   ch2-baseline [baseline], ch2-nobias [nobias]: one process a round" in plan
    assert "allocator: pinned (glibc: mmap_threshold 32 MiB" in plan
    assert not (tmp_path / "r").exists()


def test_no_baseline_and_smoke_scale_measure_the_entry_alone_and_say_so(tmp_path):
    alone = accel("run", "ch2-nobias", "--dry-run", "--no-baseline", timeout=120).stdout
    assert alone.startswith("plan: ch2-nobias, in rounds") and "--no-baseline: ch2-baseline is not measured" in alone
    smoke = accel("run", "ch2-nobias", "--dry-run", "--scale", "smoke", timeout=120).stdout
    assert "smoke scale proves the code path only" in smoke


def test_a_baseline_another_launcher_runs_comes_along_in_the_same_rounds():
    """The card's command: Table 9.2's ranks under torchrun, its 1-process baseline of the same total cores
    under the local launcher, each in its own process, round by round."""
    out = accel("launch", "ch9-cpu-gloo", "--variant", "ranks=4", "--dry-run", env={"NPROC": "4", "THREADS": "1"},
                timeout=120)
    assert out.returncode == 0, out.stderr
    assert "plan: ch9-cpu-gloo with its baseline ch9-cpu-threads, in rounds of processes" in out.stdout
    assert "ch9-cpu-threads [threads=4]  baseline of ch9-cpu-gloo" in out.stdout
    assert "4 ranks x 1 thread on" in out.stdout
    assert "ch9-cpu-gloo [ranks=4]: its launcher's ranks (its ranks are processes of launch/torchrun.sh)" \
        in " ".join(out.stdout.split())
    if len(os.sched_getaffinity(0)) < 4:
        assert "WARNING: oversubscribed (4 threads >" in out.stdout


def test_a_smoke_launch_through_another_launcher_runs_alone_and_says_no_ratio_is_judged():
    """At smoke scale the entry runs under its own launcher without its baseline (no rounds), and the plan
    says the baseline is not run and no ratio is judged. (It names no command for the verdict run.)"""
    out = accel("launch", "ch9-cpu-gloo", "--variant", "ranks=2", "--scale", "smoke", "--dry-run", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("plan: ch9-cpu-gloo under launch/torchrun.sh\n"), out.stdout
    assert "with its baseline" not in out.stdout and re.search(r"processes: +2 ranks x \d+ threads? on", out.stdout)
    assert re.search(r"note: +smoke scale proves the code path only: ch9-cpu-threads@threads=\d+ is not run, and "
                     r"no ratio is judged", " ".join(out.stdout.split())), out.stdout


def _cfg(**fields) -> RunConfig:
    base = dict(experiment="ch2-nobias", pipeline="plain_training", variant="nobias", model="cnn_fmnist",
                dataset="synthetic", scale="bench", steps=40, warmup_steps=5, batch_size=64)
    return RunConfig(**{**base, **fields})


def test_oversubscription_is_ranks_times_threads_above_the_usable_cores():
    entry = experiments.get("ch9-cpu-gloo")
    usable = preview.usable_cores()
    fits = preview.layout(entry, _cfg(), "torchrun", {"NPROC": "1", "THREADS": str(usable)})
    assert (fits.ranks, fits.threads, fits.oversubscribed) == (1, usable, False)
    over = preview.layout(entry, _cfg(), "torchrun", {"NPROC": str(usable), "THREADS": "2"})
    assert over.oversubscribed and "WARNING: oversubscribed" in over.text()
    default = preview.layout(entry, _cfg(), "torchrun", {"NPROC": "1"})  # the script's default: cores / ranks
    assert default.threads == usable
    # the launcher's default, not the planning process's own thread count (make cpu-ddp NPROC=4 printed
    # "4 ranks x 2 threads" on 2 cores while the launcher gave each rank 1)
    four = preview.layout(entry, _cfg(), "torchrun", {"NPROC": "4"}, in_process_threads=usable)
    node = {"NPROC": "4", "NNODES": "2", "NODE_RANK": "1"}  # node 1: no port of this host is checked
    assert str(four.threads) == launchers.resolve_knobs("torchrun", ["run", "x"], node).exported["OMP_NUM_THREADS"]


def test_the_estimate_multiplies_recorded_step_times_and_says_how_it_was_made(tmp_path):
    cfg = _cfg()
    unknown = estimate([cfg], tmp_path, None, 300, reference_dir=tmp_path)
    assert unknown.startswith("unknown: no recorded step time for ch2-nobias [nobias]") and "300 s" in unknown
    record = {"status": "ok", "experiment": "ch2-nobias", "variant": "nobias", "env": {"cpu_model": "elsewhere"},
              "config": {"batch_size": 32, "train_samples": 54000, "model": "cnn_fmnist", "device": "cpu"},
              "metrics": {"step_time_ms_median": 50.0}}
    (tmp_path / "x.jsonl").write_text(json.dumps(record) + "\n")
    # 45 steps x 50 ms x (64 / 32): 4.5 s a repeat; three repeats
    fixed = estimate([cfg], tmp_path, 3, None, reference_dir=tmp_path / "none")
    assert fixed.startswith("about 14 s: 3 x 4 s a round") and "another machine" in fixed
    book = estimate([_cfg(steps=None, warmup_steps=0, epochs=2)], tmp_path, 1, None,
                            reference_dir=tmp_path / "none")  # 2 epochs x 844 steps x 0.1 s
    assert book.startswith("about 169 s")


def test_bench_is_the_default_scale_of_every_experiment_command():
    from pipelines.core.cli.main import cli

    assert SCALE_DEFAULTS["bench"].rounds == "auto"
    run_scale = next(p for p in cli.commands["run"].params if p.name == "scale")
    assert run_scale.default == "bench"


def test_python_that_does_not_exist_is_one_line_before_any_launcher(tmp_path):
    out = accel("launch", "ch2-baseline", "--scale", "smoke", env={"PYTHON": "/nonexistent/python"}, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "PYTHON=/nonexistent/python is not an executable file" in out.stderr


@pytest.mark.slow
@pytest.mark.canary
def test_run_brings_its_baseline_in_alternation_and_ends_with_the_verdict(tmp_path):
    """Also what the command costs in processes (docs/design.md): the orchestrator, then one worker a round."""
    env, log = counting_starts(tmp_path)
    out = accel("run", "ch2-nobias", "--dataset", "synthetic", "--steps", "3", "--warmup-steps", "1",
                "--rounds", "2", "--results-dir", str(tmp_path / "r"), "--json", env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    starts = starts_in(log)
    assert len(check_one_orchestrator(starts, "run")) == 2 and len(starts) == 3, starts
    tmp_path = tmp_path / "r"
    assert out.stderr.startswith("plan: ch2-nobias with its baseline ch2-baseline")
    recs = records(tmp_path)
    assert sorted((r["experiment"], str(r["pairing"]["round"])) for r in recs) == [
        ("ch2-baseline", "0"), ("ch2-baseline", "1"), ("ch2-nobias", "0"), ("ch2-nobias", "1")]
    # both arms in one process a round, in interleaved blocks; each record says so and how it ran
    assert {r["pairing"]["process"] for r in recs if r["experiment"] == "ch2-nobias"} == \
        {r["pairing"]["process"] for r in recs if r["experiment"] == "ch2-baseline"}
    for rec in recs:
        metrics = rec["metrics"]
        # --steps 3: 3 blocks of 1 step (not 12 blocks of 1), the first step after each switch dropped
        assert len(metrics["blocks"]) == 3 and metrics["discarded_steps"] == 3 and metrics["gc_paused_in_timed_steps"]
        assert metrics["page_faults_minor_per_step"] >= 0 and metrics["page_faults_major_per_step"] >= 0
        assert rec["env"]["allocator_settings"]["text"].startswith("pinned (glibc: mmap_threshold 32 MiB")
        assert rec["env"]["vars"]["GLIBC_TUNABLES"].endswith("glibc.malloc.top_pad=67108864")
    # one machine card a process (record/card.py), measured before its arms: both arms of a round keep the same
    cards = {r["pairing"]["process"]: r["card"] for r in recs}
    assert len(cards) == 2 and all(c["measured"] and c["triad_gbs"] > 0 and c["allreduce_gbs"] is None
                                   for c in cards.values()), cards
    assert all(r["card"] == cards[r["pairing"]["process"]] for r in recs)
    # one step profile an arm in every round, after its timed blocks (train/profiler.py): its ops, FLOPs, bytes
    for rec in recs:
        profile = rec["metrics"].get("step_profile")
        assert profile is not None and profile["steps"] >= 1, rec["pairing"]
        assert profile["total"]["flops"] > 0 and profile["total"]["bytes"] > 0, profile["total"]
        assert any(op["op"] in ("aten::mkldnn_convolution", "aten::convolution_backward", "aten::addmm")
                   for op in profile["ops"]), profile["ops"]
    result = json.loads(out.stdout)  # --json: stdout is the verdict alone
    arms = {(a["experiment"], a["variant"]): a for a in result["arms"]}
    nobias = arms[("ch2-nobias", "nobias")]
    assert nobias["baseline"].startswith("ch2-baseline [baseline]") and nobias["ratio"] > 0
    assert nobias["published_ratio"] == 148 / 125 and nobias["published_source"] == "book:ch2"
    # 2 processes < 3: no verdict
    assert nobias["verdict"] == "inconclusive" and "2 processes: the interval cannot see" in nobias["why"]
    assert len(result["records"]) == 4 and result["report"].startswith("accel report --results-dir")


def test_an_auto_run_bar_counts_the_budget_and_names_the_repeat(capsys):
    from pipelines.core.stats import stopping
    from pipelines.core.train import progress

    rule = stopping.AutoStop(budget_s=120)
    bars = progress.RunProgress("ch3-compile-cnn-cpu", None, progress.Settings(bars=True), rule=rule)
    rule.after_round({}, 1.0)
    bars.finished({"variant": "eager", "repeat": 0, "status": "ok"})
    bars.close()
    err = capsys.readouterr().err
    assert "ch3-compile-cnn-cpu repeat 2 (at most 50)" in err and "/120 s budget" in err


def test_cpu_only_runs_silence_torchs_no_cuda_warning_that_would_land_in_the_bars():
    import logging

    import torch

    from pipelines.core.cli.run_command import quiet_foreign_warnings
    from pipelines.core.harness.preview import device_text

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: the warning is not raised here")
    quiet_foreign_warnings("cpu")
    assert logging.getLogger("torch.utils.cpp_extension").getEffectiveLevel() >= logging.ERROR
    assert device_text({_cfg().device}) == "cpu (no CUDA GPU visible here)"
