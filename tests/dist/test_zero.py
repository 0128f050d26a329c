"""ZeRO (s004-deepspeed) and the course's Fabric strategies (dlf-u9-multigpu), run for real: 2 ranks under
launch/torchrun.sh over Gloo. The proof is in the bytes each rank holds (core/distributed/sharding.py) against DDP's
full replicas, and in losses equal to DDP's: sharding changes where tensors live, not the update.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import torch

from conftest import REPO, accel, assert_refused, records
from distutil import free_port
from pipelines.core.distributed import sharding
from pipelines.core.config import experiments

SMOKE = ("--scale", "smoke", "--dataset", "synthetic")
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
ZERO_ARMS = ("ddp", "deepspeed-1", "deepspeed-2", "deepspeed-3", "deepspeed-3-offload", "torch-zero-1",
             "fsdp2-zero-2", "fsdp2-zero-3", "fsdp2-zero-3-offload")  # the bytes study; deepspeed-note: its own test
LOSS_RTOL = 1e-4  # same data, same AdamW update; only the order of float reductions may differ


def launch_two_ranks(results_dir, *args: str) -> dict[str, dict]:
    """One 2-rank torchrun launch; the records by variant (rank 0 writes them)."""
    run = subprocess.run(["launch/torchrun.sh", "run", *args, *SMOKE, "--results-dir", str(results_dir)], cwd=REPO,
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "NPROC": "2", "MASTER_PORT": str(free_port())})
    assert run.returncode == 0, run.stderr[-4000:]
    return {r["variant"]: r for r in records(results_dir)}


def halved(arm: list[int], full: list[int]) -> bool:
    """Each of 2 ranks holds about half of the full copy, and the halves add up to it (padding aside)."""
    return all(value <= 0.6 * whole for value, whole in zip(arm, full)) and \
        abs(sum(arm) - full[0]) <= 0.05 * full[0]


def whole(arm: list[int], full: list[int]) -> bool:
    return all(abs(value - copy) <= 0.01 * copy for value, copy in zip(arm, full))


@pytest.fixture(scope="module")
def zero_run(tmp_path_factory) -> dict[str, dict]:
    variants = [token for arm in ZERO_ARMS for token in ("--variant", arm)]
    return launch_two_ranks(tmp_path_factory.mktemp("zero"), "s004-deepspeed", *variants)


def check_bytes(run: dict[str, dict], arm: str, sharded: set[str]) -> None:
    """`sharded` categories are halved against DDP's on both ranks; the other model categories are whole."""
    full = run["ddp"]["metrics"]["bytes_per_rank"]
    held = run[arm]["metrics"]["bytes_per_rank"]
    for name in ("params_at_rest", "grads", "optimizer_state"):
        assert (halved if name in sharded else whole)(held[name], full[name]), (arm, name, held[name], full[name])


@pytest.mark.slow
def test_ddp_holds_full_replicas_on_every_rank(zero_run):
    ddp = zero_run["ddp"]
    assert ddp["status"] == "ok" and ddp["dist"]["world_size"] == 2 and ddp["dist"]["backend"] == "gloo"
    held, param_bytes = ddp["metrics"]["bytes_per_rank"], 4 * ddp["metrics"]["parameters"]
    assert held["params_at_rest"] == held["params_in_forward"] == held["grads"] == [param_bytes] * 2
    assert all(2 * param_bytes <= state <= 2 * param_bytes + 4096 for state in held["optimizer_state"])  # 2 moments
    assert held["master_params"] == [0, 0] and len(ddp["metrics"]["peak_mib_per_rank"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("arm, sharded", [("torch-zero-1", {"optimizer_state"}),
                                          ("fsdp2-zero-2", {"optimizer_state", "grads", "params_at_rest"}),
                                          ("fsdp2-zero-3", {"optimizer_state", "grads", "params_at_rest"}),
                                          ("fsdp2-zero-3-offload", {"optimizer_state", "grads", "params_at_rest"})])
def test_torch_equivalents_shard_their_stage(zero_run, arm, sharded):
    record = zero_run[arm]
    assert record["status"] == "ok", record.get("error")
    check_bytes(zero_run, arm, sharded)
    full_forward = zero_run["ddp"]["metrics"]["bytes_per_rank"]["params_in_forward"]
    in_forward = record["metrics"]["bytes_per_rank"]["params_in_forward"]
    if arm == "fsdp2-zero-2":  # reshard_after_forward=False: whole from forward to backward (ZeRO-2),
        assert all(value >= copy for value, copy in zip(in_forward, full_forward))  # in padded all-gather buffers
    elif arm.startswith("fsdp2-zero-3"):  # blocks freed after their forward; the root's own stay
        assert all(value < 0.75 * copy for value, copy in zip(in_forward, full_forward))
    assert record["metrics"]["final_loss"] == pytest.approx(zero_run["ddp"]["metrics"]["final_loss"], rel=LOSS_RTOL)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed (pip install -e '.[zero]')")
# DeepSpeed 0.19's stage 1 reduces the gradients into each rank's partition when backward ends, so at the
# step its gradients are halved too (measured); torch's stage 1 (ZeroRedundancyOptimizer) keeps them whole.
@pytest.mark.parametrize("arm, sharded", [("deepspeed-1", {"optimizer_state", "grads"}),
                                          ("deepspeed-2", {"optimizer_state", "grads"}),
                                          ("deepspeed-3", {"optimizer_state", "grads", "params_at_rest"}),
                                          ("deepspeed-3-offload", {"optimizer_state", "grads", "params_at_rest"})])
def test_deepspeed_stages_shard_what_they_claim(zero_run, arm, sharded):
    """Stage 1: optimizer state 1/2 of DDP's per rank; stage 2: + gradients; stage 3: + parameters; offload:
    the same bytes, in host memory (on a CPU run, the same memory)."""
    record = zero_run[arm]
    assert record["status"] == "ok", record.get("error")
    assert any("DeepSpeed" in note and "gloo" in note for note in record["notes"])
    check_bytes(zero_run, arm, sharded)
    held = record["metrics"]["bytes_per_rank"]
    param_bytes = 4 * zero_run["ddp"]["metrics"]["parameters"]
    assert halved(held["master_params"], [param_bytes] * 2)  # DeepSpeed's fp32 copy of each rank's partition
    if arm.startswith("deepspeed-3"):
        assert all(value < 0.75 * param_bytes for value in held["params_in_forward"])
    assert record["metrics"]["final_loss"] == pytest.approx(zero_run["ddp"]["metrics"]["final_loss"], rel=LOSS_RTOL)
    assert record["metrics"]["test_accuracy_pct"] == zero_run["ddp"]["metrics"]["test_accuracy_pct"]


@pytest.mark.slow
@pytest.mark.skipif(HAS_DEEPSPEED, reason="DeepSpeed is installed: its arms run (the test above)")
def test_without_deepspeed_its_arms_are_skipped_with_the_reason(zero_run):
    for arm in ZERO_ARMS:
        if arm.startswith("deepspeed"):
            assert zero_run[arm]["status"] == "skipped" and "pip install" in zero_run[arm]["notes"][0]


def note_config(scale: str, device: str, world_size: int = 2) -> dict:
    """The DeepSpeed config deepspeed-note builds for `world_size` ranks on `device`, at `scale`."""
    from pipelines import zero
    from pipelines.core.harness import plan as planning

    cfg, = planning.plan(experiments.get("s004-deepspeed"), scale, {"dataset": "synthetic"}, {},
                       ("deepspeed-note",)).configs
    return zero.deepspeed_config(cfg, cfg.options, world_size, torch.device(device))


def test_note_arm_is_the_notes_deepspeed_config():
    """The lecture note's snippet: ZeRO-3, parameters and optimizer offloaded to the CPU, train_batch_size 256,
    gradient_accumulation_steps 4, fp16; the micro-batch it leaves unsaid is 256 / (4 x 2 ranks) = 32."""
    config = note_config("bench", "cuda")
    assert (config["train_batch_size"], config["gradient_accumulation_steps"]) == (256, 4)
    assert config["train_micro_batch_size_per_gpu"] * 4 * 2 == 256
    assert config["fp16"] == {"enabled": True}
    zero = config["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_param"] == zero["offload_optimizer"] == {"device": "cpu"}
    assert note_config("book", "cuda") == config


def test_note_arm_runs_fp32_on_cpu_and_a_consistent_batch_at_smoke_scale():
    """fp16 only on CUDA (precision=auto); smoke scale keeps the accumulation, with its tiny micro-batch."""
    assert note_config("bench", "cpu")["fp16"] == {"enabled": False}
    smoke = note_config("smoke", "cpu")
    micro, accum = smoke["train_micro_batch_size_per_gpu"], smoke["gradient_accumulation_steps"]
    assert accum == 4 and micro <= 8 and smoke["train_batch_size"] == micro * accum * 2


@pytest.mark.parametrize("ranks, needle", [
    (4, "needs a micro-batch of 16 per rank, but --batch-size is 32: pass --batch-size 16"),
    (3, "train_batch=256 is not divisible by accum_steps 4 x 3 ranks = 12"),
])
def test_note_arm_with_a_batch_deepspeed_cannot_split_is_refused(results_dir, data_root, ranks, needle):
    """train_batch = micro-batch x accum_steps x ranks: run alone, the arm is refused before any rank starts
    (the launchers' preflight, with the world they are about to start), naming the fix."""
    assert_refused(["preflight", "--world-size", str(ranks), "run", "s004-deepspeed", "--variant", "deepspeed-note",
                    "--scale", "bench", "--dataset", "synthetic"], 3, needle, results_dir, data_root)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed (pip install -e '.[zero]')")
def test_with_other_arms_a_rank_count_the_note_arm_cannot_split_skips_only_that_arm(tmp_path):
    """`make s004-deepspeed NPROC=4` (accel launch at bench scale, cut to one short round; here with DDP, a
    DeepSpeed stage and the note arm, since every arm takes a minute on 2 cores and the bytes study above runs
    them all) keeps running the other arms on 4 ranks; the note arm is recorded as skipped, its record saying
    why (train_batch 256 over accum_steps 4 x 4 ranks needs a micro-batch of 16). The verdict table lists the
    arms that ran, and the line after it names the skipped arm with its reason."""
    every_arm = ["ddp", "deepspeed-1", "deepspeed-note"]
    run = accel("launch", "s004-deepspeed", *(token for arm in every_arm for token in ("--variant", arm)),
                "--scale", "bench", "--dataset", "synthetic", "--model", "vit_tiny",
                "--batch-size", "8", "--rounds", "1", "--blocks", "1", "--steps", "2", "--warmup-steps", "1",
                "--results-dir", str(tmp_path), env={"NPROC": "4", "MASTER_PORT": str(free_port())}, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    found = {r["variant"]: r for r in records(tmp_path)}
    assert sorted(found) == sorted(every_arm)
    assert {arm for arm, record in found.items() if record["status"] == "skipped"} == {"deepspeed-note"}
    assert all(found[arm]["status"] == "ok" and found[arm]["dist"]["world_size"] == 4
               for arm in every_arm if arm != "deepspeed-note"), {arm: r["status"] for arm, r in found.items()}
    assert found["deepspeed-note"]["notes"] == [
        "option train_batch=256 with accum_steps 4 x 4 ranks = 16 needs a micro-batch of 16 per rank, but "
        "--batch-size is 8: pass --batch-size 16, or -o train_batch=128"]
    table = run.stdout.split("verdict:", 1)[1]
    assert all(f"s004-deepspeed [{arm}] " in table for arm in every_arm if arm != "deepspeed-note"), table
    assert f"not run here: s004-deepspeed [deepspeed-note]: {found['deepspeed-note']['notes'][0]}" in table, table


def test_accumulation_and_precision_on_a_torch_arm_are_refused(results_dir, data_root):
    assert_refused(["run", "s004-deepspeed", "--variant", "ddp", "-o", "accum_steps=4", *SMOKE], 2,
                   "need impl=deepspeed", results_dir, data_root)


@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed (pip install -e '.[zero]')")
@pytest.mark.skipif(torch.ops.mkldnn._is_mkldnn_fp16_supported(), reason="this CPU has oneDNN fp16")
def test_fp16_on_a_cpu_without_it_is_skipped_with_the_reason(results_dir, data_root):
    assert_refused(["preflight", "--world-size", "2", "run", "s004-deepspeed", "--variant", "deepspeed-note",
                    "-o", "precision=fp16", *SMOKE], 3, "DeepSpeed's CPU accelerator has no fp16 on this CPU",
                   results_dir, data_root)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed (pip install -e '.[zero]')")
def test_note_arm_accumulates_in_the_engine_on_two_ranks(tmp_path):
    """8 micro-batches (loop steps) per rank with gradient_accumulation_steps 4: the engine stepped the
    optimizer twice; on CPU in fp32, with the record saying why fp16 did not run."""
    record = launch_two_ranks(tmp_path, "s004-deepspeed", "--variant", "deepspeed-note", "--warmup-steps", "1",
                              "--steps", "7")["deepspeed-note"]
    assert record["status"] == "ok", record.get("error")
    metrics = record["metrics"]
    assert (metrics["micro_steps"], metrics["optimizer_steps"], metrics["skipped_steps"]) == (8, 2, 0)
    assert (metrics["gradient_accumulation_steps"], metrics["train_batch_size"]) == (4, 4 * 4 * 2)
    config = record["artifacts"]["deepspeed_config"]
    assert config["fp16"] == {"enabled": False} and config["zero_optimization"]["stage"] == 3
    assert config["zero_optimization"]["offload_param"] == config["zero_optimization"]["offload_optimizer"]
    assert any("fp16 is not run here" in note for note in record["notes"])
    assert any("stands in for train_batch 256" in note for note in record["notes"])
    held = metrics["bytes_per_rank"]  # ZeRO-3: each rank holds half of the fp32 parameters
    assert halved(held["params_at_rest"], [4 * metrics["parameters"]] * 2)
    assert metrics["final_loss"] is not None and metrics["test_accuracy_pct"] is not None


def test_zero_stage_outside_0_to_3_is_refused(results_dir, data_root):
    assert_refused(["run", "s004-deepspeed", "-o", "stage=4", *SMOKE], 2, "option stage must be between 0 and 3",
                   results_dir, data_root)


def test_offload_without_a_stage_is_refused(results_dir, data_root):
    assert_refused(["run", "s004-deepspeed", "--variant", "ddp", "-o", "offload=true", *SMOKE], 2,
                   "offload=true needs a ZeRO stage of 1 or more", results_dir, data_root)


def test_one_process_is_refused_with_the_launch_command(results_dir, data_root):
    assert_refused(["run", "s004-deepspeed", "--variant", "ddp", *SMOKE], 3, "NPROC=2 accel launch s004-deepspeed",
                   results_dir, data_root)


@pytest.mark.slow
def test_fabric_strategies_on_two_cpu_processes(tmp_path):
    """ddp and fsdp2 train over Gloo with equal losses; fsdp2 halves every rank's bytes; the GPU-only
    strategies and the one-process arm are recorded as skipped, each with its reason."""
    run = launch_two_ranks(tmp_path, "dlf-u9-multigpu")
    ddp, fsdp2 = run["ddp"], run["fsdp2"]
    assert ddp["status"] == fsdp2["status"] == "ok" and fsdp2["dist"]["world_size"] == 2
    assert fsdp2["metrics"]["final_loss"] == pytest.approx(ddp["metrics"]["final_loss"], rel=LOSS_RTOL)
    for name in ("params_at_rest", "grads", "optimizer_state"):
        assert halved(fsdp2["metrics"]["bytes_per_rank"][name], ddp["metrics"]["bytes_per_rank"][name]), name
    assert len(fsdp2["metrics"]["peak_mib_per_rank"]) == 2
    assert "DDPStrategy" in ddp["notes"][0] and "ModelParallelStrategy" in fsdp2["notes"][0]
    reasons = {arm: run[arm]["notes"][0] for arm in ("single-gpu", "fsdp", "deepspeed-2", "deepspeed-3")}
    assert all(run[arm]["status"] == "skipped" for arm in reasons)
    # the one-device arm is sized to 1 process (ranks=1): the rounds start it alone; a 2-rank launch skips it
    assert "NPROC=1 accel launch dlf-u9-multigpu --variant single-gpu" in reasons["single-gpu"]
    assert "FSDP1" in reasons["fsdp"] and "CUDA GPUs only" in reasons["deepspeed-2"]


@pytest.mark.slow
def test_talk_fsdp_step_runs_fabric_fsdp_and_labels_the_per_block_arm_extra(tmp_path):
    """The talk's step 07 as the talk ran it: Fabric's strategy="fsdp" (FSDP1: skipped on CPU, with the
    reason) and the extra per-block FSDP2 arm, which shards every rank's bytes and steps ExponentialLR(0.9)
    once per finished epoch; the published figures belong to the talk's arm only."""
    run = launch_two_ranks(tmp_path, "vit-fsdp-4gpu-sched", "--device", "cpu", "-o", "backend=gloo",
                           "--model", "vit_tiny", "--num-workers", "0")
    talk, extra = run["fabric-fsdp"], run["fsdp2-per-block"]
    assert talk["status"] == "skipped" and "FSDP1" in talk["notes"][0]
    assert extra["status"] == "ok" and "ModelParallelStrategy" in extra["notes"][0]
    options = extra["config"]["options"]
    assert (options["precision"], options["matmul_precision"], extra["config"]["seed"]) == ("bf16-mixed", "medium",
                                                                                            123)
    whole_params = extra["metrics"]["parameters"] * 4  # fp32 bytes of one full copy
    assert all(held <= 0.6 * whole_params for held in extra["metrics"]["bytes_per_rank"]["params_at_rest"])
    epochs = extra["metrics"]["epochs_completed"]
    assert epochs >= 1 and extra["metrics"]["lr_final"] == pytest.approx(extra["config"]["lr"] * 0.9 ** epochs)
    entry = experiments.get("vit-fsdp-4gpu-sched")
    assert {fig.variant for fig in entry.published} == {"fabric-fsdp"}


@pytest.mark.slow
def test_fabric_single_device_arm_runs_alone(results_dir):
    run = accel("run", "dlf-u9-multigpu", "--variant", "single-gpu", "--variant", "ddp", *SMOKE,
                "--results-dir", str(results_dir))
    assert run.returncode == 0, run.stderr[-3000:]
    found = {r["variant"]: r for r in records(results_dir)}
    assert found["single-gpu"]["status"] == "ok" and found["single-gpu"]["metrics"]["final_loss"] is not None
    assert found["ddp"]["status"] == "skipped" and "NPROC=2" in found["ddp"]["notes"][0]


def test_local_bytes_counts_shared_storage_once_and_unwraps_optimizers():
    weight = torch.zeros(10, 4)
    assert sharding.local_bytes([weight, weight[:5], weight.view(-1), None]) == 160
    inner = torch.optim.AdamW([torch.nn.Parameter(weight)])

    class Wrapper:  # the shape of Fabric's and DeepSpeed's wrappers
        optimizer = inner

    assert sharding.innermost(Wrapper()) is inner and sharding.innermost(inner) is inner
