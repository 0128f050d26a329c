"""Tensor and pipeline parallelism (s004-tp, s004-pp) and DataParallel vs DDP (s004-dp-vs-ddp), for real.

Equality: a 2-rank Gloo group (tests/parallel_probe.py) runs the pipelines' own split functions on a
seeded transformer and one batch; this process runs the unsplit model on the same batch. Tolerances
(fp32): outputs and losses rtol 1e-5 / atol 1e-6; gradients rtol 1e-4 / atol 1e-6, since the split
layers sum partial products in another order (the key bias's gradient is mathematically zero and
comes out as ~1e-9 noise either way, hence the absolute floor).
End to end: the entries under torchrun and Open MPI's mpirun; the measured bubble falls with more
micro-batches (an ordering of recorded idle fractions, never a time threshold); bad world sizes are
refused in one line: by `accel launch` before any rank starts, and by every rank started directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import parallel_probe
from conftest import REPO, accel, records
from distutil import Procs, free_port, rank_env

pytestmark = pytest.mark.slow
SMOKE = ("--scale", "smoke", "--dataset", "synthetic")
OUT_TOL = {"rtol": 1e-5, "atol": 1e-6}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-6}


def unsplit():
    """A fresh copy of the probe's seeded model, and its batch: the single-process reference."""
    x, y = parallel_probe.batch()
    return parallel_probe.seeded_model(), x, y


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """Both ranks' results from one 2-rank run of tests/parallel_probe.py."""
    out = tmp_path_factory.mktemp("probe")
    group, port = Procs(), free_port()
    try:
        ranks = [group.start([sys.executable, "tests/parallel_probe.py", str(out)], env=rank_env(r, 2, port))
                 for r in (0, 1)]
        for proc in ranks:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:]
    finally:
        group.close()
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in (0, 1)]


def test_tensor_parallel_forward_and_gradients_equal_the_single_process_block(probe):
    (rank0, rank1), (model, x, y) = probe, unsplit()
    out = model(x)
    F.cross_entropy(out, y).backward()
    for result in (rank0["tp"], rank1["tp"]):  # every rank computes the whole output
        torch.testing.assert_close(result["out"], out.detach(), **OUT_TOL)
        for name, param in model.named_parameters():
            torch.testing.assert_close(result["grads"][name], param.grad, **GRAD_TOL, msg=name)


def test_tensor_parallel_halves_the_split_weights_per_rank(probe):
    (rank0, rank1), (model, _, _) = probe, unsplit()
    names = rank0["tp"]["split_weight_names"]
    assert len(names) == 6 * model.depth  # q, k, v, out, up, down in every block
    full_split = sum(dict(model.named_parameters())[n].nbytes for n in names)
    full_blocks = sum(p.nbytes for p in model.blocks.parameters())
    for result in (rank0["tp"], rank1["tp"]):
        assert result["split_weight_bytes"] * 2 == full_split  # exactly half of every split weight
        assert abs(result["block_bytes"] / full_blocks - 0.5) < 0.01  # + the small replicated norms/biases


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_loss_and_gradients_equal_the_unsplit_model(probe, schedule):
    (first, last), (model, x, y) = probe, unsplit()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    losses = last[schedule]["losses"]
    assert len(losses) == 4 and not first[schedule]["losses"]  # the last stage alone holds the loss
    torch.testing.assert_close(torch.stack(losses).mean(), loss.detach(), **OUT_TOL)  # mean of equal chunks
    reference = dict(model.named_parameters())
    stage_grads = {**first[schedule]["grads"], **last[schedule]["grads"]}
    assert sorted(stage_grads) == sorted(reference)  # the stages hold the whole model, once
    assert not set(first[schedule]["grads"]) & set(last[schedule]["grads"])
    for name, grad in stage_grads.items():
        torch.testing.assert_close(grad, reference[name].grad, **GRAD_TOL, msg=name)
    assert first[schedule]["busy_s"] > 0 and last[schedule]["busy_s"] > 0


def launch(script: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([f"launch/{script}", *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MASTER_PORT": str(free_port()), **env})


def by_variant(results_dir) -> dict[str, dict]:
    return {r["variant"]: r for r in records(results_dir)}


def test_tensor_parallel_entry_records_bytes_per_rank_and_step_time_under_torchrun(tmp_path):
    run = launch("torchrun.sh", {"NPROC": "2"}, "run", "s004-tp", *SMOKE, "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    arms = by_variant(tmp_path)
    assert {a: r["status"] for a, r in arms.items()} == {"replicate": "ok", "tensor": "ok"}
    replicate, tensor = arms["replicate"]["metrics"], arms["tensor"]["metrics"]
    assert arms["tensor"]["dist"]["world_size"] == 2 and tensor["tp_degree"] == 2
    assert replicate["param_bytes_per_rank"] == replicate["param_bytes_full"] == tensor["param_bytes_full"]
    assert abs(tensor["block_param_bytes_fraction"] - 0.5) < 0.01
    assert tensor["param_bytes_per_rank"] < 0.6 * tensor["param_bytes_full"]  # embedding/head stay replicated
    assert tensor["samples_per_step"] == replicate["samples_per_step"] == 16  # same global batch
    assert tensor["step_time_ms_median"] > 0 and replicate["step_time_ms_median"] > 0
    assert tensor["parameters"] == replicate["parameters"]  # rank 0 evaluated a gathered full copy
    assert tensor["test_accuracy_pct"] is not None


def test_pipeline_bubble_shrinks_with_more_microbatches_under_torchrun(tmp_path):
    """A compute-dominated setup (transformer_small, global batch 64, 6 measured steps): the idle share of
    the stages, from their timed forward/backward chunks, is larger with 1 micro-batch than with 4."""
    run = launch("torchrun.sh", {"NPROC": "2"}, "run", "s004-pp", *SMOKE, "--steps", "6", "--model",
                 "transformer_small", "--batch-size", "32", "--variant", "microbatches=1", "--variant",
                 "microbatches=4", "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    arms = {a: r["metrics"] for a, r in by_variant(tmp_path).items()}
    one, four = arms["microbatches=1"], arms["microbatches=4"]
    assert (one["bubble_theory"], four["bubble_theory"]) == (0.5, 0.2)
    assert one["bubble_measured"] > four["bubble_measured"], (one, four)
    for metrics in (one, four):
        assert metrics["stages"] == 2 and metrics["stage_blocks"] == [[0, 1], [2, 3]]
        assert all(0 < busy < metrics["step_s"] for busy in metrics["stage_busy_s"])
        assert metrics["final_loss"] is not None  # broadcast from the last stage to rank 0's record
        assert sum(metrics["stage_param_bytes"]) == metrics["parameters"] * 4  # fp32, each layer on one stage
    torch.testing.assert_close(one["final_loss"], four["final_loss"], rtol=1e-4, atol=1e-5)  # same math


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (openmpi-bin)")
def test_model_parallel_entries_run_unchanged_under_mpirun(tmp_path):
    for entry, variant in (("s004-tp", "tensor"), ("s004-pp", "microbatches=2")):
        run = launch("mpirun.sh", {"NP": "2"}, "run", entry, *SMOKE, "--variant", variant,
                     "--results-dir", str(tmp_path / entry))
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        (rec,) = records(tmp_path / entry)
        assert rec["status"] == "ok" and rec["dist"]["launcher"] == "mpirun" and rec["dist"]["world_size"] == 2


def test_dataparallel_arm_is_skipped_with_the_reason_and_ddp_runs(tmp_path):
    if torch.cuda.device_count() >= 2:
        pytest.skip("2+ GPUs: the DataParallel arm would run (make s004-dp-vs-ddp)")
    run = launch("torchrun.sh", {"NPROC": "2"}, "run", "s004-dp-vs-ddp", *SMOKE, "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    arms = by_variant(tmp_path)
    assert arms["dataparallel"]["status"] == "skipped" and arms["one-device"]["status"] == "skipped"
    assert "needs 1 processes but this run has 2" in arms["one-device"]["notes"][0]
    assert "nn.DataParallel drives its GPUs from one process; it runs with --device cuda" \
        in arms["dataparallel"]["notes"][0]
    ddp = arms["ddp"]
    assert ddp["status"] == "ok" and ddp["dist"]["world_size"] == 2 and ddp["config"]["options"]["strategy"] == "ddp"


@pytest.mark.parametrize("entry,world,extra,needle", [
    ("s004-tp", 3, (), "tensor-parallel degree 3 (one shard per rank) does not divide model transformer_tiny's 4 "
                       "attention heads"),
    ("s004-pp", 5, (), "5 pipeline stages (one per rank) but model transformer_tiny has 4 transformer blocks"),
    ("s004-pp", 2, ("-o", "microbatches=3"), "global batch 16 (--batch-size 8 x 2 ranks) does not split into "
                                              "microbatches=3"),
    ("s004-tp", 2, ("--model", "cnn_cifar10"), "model cnn_cifar10 has no splittable transformer blocks"),
])
def test_a_world_size_the_model_cannot_split_over_is_refused_by_every_rank(entry, world, extra, needle, tmp_path,
                                                                          accel_in_process):
    """Every rank refuses before joining the group: one line each, exit 2, nothing written (in this process,
    with each rank's environment: the check comes before any work)."""
    port = free_port()
    for rank in (0, world - 1):  # the first and the last rank (every rank runs the same check)
        run = accel_in_process("run", entry, *SMOKE, *extra, "--results-dir", str(tmp_path),
                               env=rank_env(rank, world, port))
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
        assert needle in lines[0] and "Traceback" not in run.stderr
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


@pytest.mark.parametrize("launcher_env,entry,needle", [
    ({"NPROC": "3"}, "s004-tp", "tensor-parallel degree 3"),
    ({"NPROC": "5"}, "s004-pp", "5 pipeline stages (one per rank)"),
])
def test_launch_refuses_a_world_size_once_before_any_rank_starts(launcher_env, entry, needle, tmp_path):
    """`make s004-tp NPROC=3` (accel launch): one line, exit 2, no torchrun failure report, nothing written."""
    run = accel("launch", entry, *SMOKE, "--results-dir", str(tmp_path), env=launcher_env, timeout=120)
    lines = [line for line in run.stderr.strip().splitlines() if not line.startswith("+ ")]  # the echoed command
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert needle in lines[0] and "torch.distributed.run" not in run.stderr
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_bubble_is_idle_time_against_the_slowest_stages_span():
    """GPipe over 2 stages, every forward and backward chunk 1 unit. m=1: stage 0 runs F 0-1 and B 3-4
    (span 4), stage 1 waits, runs F 1-2 and B 2-3 and is done at 3: the step lasts 4, each stage is busy
    2 of it. m=4: stage 0 F 0-4, B 6-10; stage 1 F 1-5, B 5-9: busy 8 of 10. Measured = theory; the
    warm-up step and one slow outlier step do not move it."""
    from pipelines.pipeline_parallel import bubble, bubble_theory

    warm, outlier = 9.0, 40.0
    one = bubble(busy=[[warm, 2, 2, 2], [warm, 2, 2, 2]], spans=[[warm, 4, 4, outlier], [warm, 3, 3, 3]], warmup=1)
    four = bubble(busy=[[warm, 8, 8, 8], [warm, 8, 8, 8]], spans=[[warm, 10, 10, 10], [warm, 9, 9, 9]], warmup=1)
    assert one["stage_idle_fraction"] == [0.5, 0.5] and one["bubble_measured"] == bubble_theory(2, 1)
    assert four["stage_idle_fraction"] == [0.2, 0.2] and four["bubble_measured"] == bubble_theory(2, 4)
    assert one["step_s"] == 4 and one["stage_busy_s"] == [2, 2]
