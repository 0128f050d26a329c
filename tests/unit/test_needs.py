"""Declared needs (harness/pipeline.py `Needs`): a technique file says what some arms need, and the harness
writes the skip's one line with the command that runs the arm where it can (harness/refusals.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from pipelines.core.config import experiments
from pipelines.core.harness import plan as planning, refusals
from pipelines.core.train.loop import RunContext

PIPELINES_DIR = Path(__file__).resolve().parents[2] / "pipelines"
# technique files, and the self-checks shaped like them: every module that exposes a PIPELINE (selfcheck/ also
# holds ci/harness-overhead.py's two forms, which are no catalog entry)
TECHNIQUES = sorted(p for p in [*PIPELINES_DIR.glob("*.py"), *PIPELINES_DIR.glob("selfcheck/*.py")]
                    if not p.name.startswith("_") and "\nPIPELINE = " in p.read_text())


def reasons(experiment_id: str, world_size: int = 1) -> dict[str, str | None]:
    the_plan = planning.plan(experiments.get(experiment_id), "smoke", {}, {}, ())
    ctx = RunContext(torch.device("cpu"), 0, world_size)
    return {cfg.variant: refusals.skip_reason(the_plan.pipeline, cfg, ctx) for cfg in the_plan.configs}


@pytest.mark.parametrize("experiment_id,variant,world_size,words", [
    ("ch7-amp", "fp16", 1, "it runs with --device cuda: accel run ch7-amp --variant fp16 --device cuda"),
    ("s004-tp", "tensor", 1, "start it with 2 or more processes: NPROC=2 accel launch s004-tp --variant tensor"),
    ("ch9-cpu-gloo", "ranks=4", 2, "needs 4 processes but this run has 2; start it with NPROC=4 accel launch"),
    ("s004-dp-vs-ddp", "one-device", 2, "needs 1 processes but this run has 2"),
])
def test_a_declared_need_becomes_the_reason_and_the_command(experiment_id, variant, world_size, words):
    reason = reasons(experiment_id, world_size)[variant]
    assert reason is not None and words in reason and "\n" not in reason


def test_arms_that_meet_their_needs_run():
    assert reasons("ch7-amp")["fp32"] is None and reasons("ch7-amp")["bf16"] is None
    assert reasons("ch9-cpu-gloo", 2)["ranks=2"] is None
    assert reasons("s004-tp", 2)["tensor"] is None


def test_technique_files_state_their_contract_in_one_import_and_name_no_make_target():
    """The contract (the kinds, Needs, Supports, Trainable, the option groups, the refusals) comes from one
    module in one statement; the commands a skip shows are the harness's, so no technique file embeds `make`."""
    from pipelines.core.harness import pipeline as contract

    exported = set(contract.__all__)
    for path in TECHNIQUES:
        tree = ast.parse(path.read_text())
        statements = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
                      and node.module.startswith("pipelines.core")]
        from_contract = [node for node in statements if node.module == "pipelines.core.harness.pipeline"]
        elsewhere = [f"{node.module}.{alias.name}" for node in statements if node.module != contract.__name__
                     for alias in node.names if alias.name in exported]
        assert len(from_contract) <= 1 and not elsewhere, f"{path.name}: {elsewhere or 'two contract imports'}"
        strings = [node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)]
        assert not [s for s in strings if "make s0" in s or "make ch" in s or "`make " in s], path.name


def test_an_arm_whose_collective_the_backend_lacks_is_skipped_with_the_backend_that_has_it():
    """accel's oneCCL binding implements all-reduce, broadcast, all-gather and barrier: FSDP's reduce-scatter
    and a pipeline's send/recv are declared by their technique files, so the arm is skipped with the command
    that runs it, not failed inside the first step; a DDP arm over ccl still runs."""
    def under_ccl(experiment_id: str, variant: str | None = None) -> str | None:
        the_plan = planning.plan(experiments.get(experiment_id), "smoke", {}, {"backend": "ccl"}, ())
        cfg = next(c for c in the_plan.configs if variant in (None, c.variant))
        return refusals.skip_reason(the_plan.pipeline, cfg, RunContext(torch.device("cpu"), 0, 2))

    fsdp = under_ccl("s004-fsdp", "fsdp")
    assert fsdp is not None and "it calls reduce_scatter, which the ccl backend does not implement" in fsdp
    assert "-o backend=gloo" in fsdp and "\n" not in fsdp
    assert "send, recv" in under_ccl("s004-pp", "microbatches=2")
    assert under_ccl("ch9-cpu-gloo", "ranks=2") is None  # DDP: all-reduce and broadcast
