"""An arm built for the engine (harness/execute.py): seeded, its loaders, the technique's setup and
preparation, its Training with the runner's hooks."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch  # noqa: I001  (before numpy: libgomp binds this thread before OpenBLAS starts its pool,
import numpy as np  # so with GOMP_CPU_AFFINITY every thread of the process inherits a bound core)

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.data import datasets
from pipelines.core.distributed import collectives
from pipelines.core.harness.pipeline import Preparation, warmup_config
from pipelines.core.harness.plan import Plan
from pipelines.core.train import checkpoint, loop, progress, resume, torch_state


@dataclass
class Built:
    """One arm of a unit, built: its plan and config, the technique's trainable and loaders, its Training
    (run whole, or in blocks by train/interleave.py) and its step counter (progress, and how far it got)."""

    plan: Plan
    cfg: RunConfig
    trainable: loop.Trainable
    loaders: Any
    training: loop.Training
    counter: progress.RepeatProgress


def seed_everything(seed: int | None) -> None:
    """Every generator an arm draws from: Python's, NumPy's global one and torch's."""
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def loaders_for(the_plan: Plan, cfg: RunConfig, ctx: loop.RunContext):
    transforms = the_plan.pipeline.transforms(cfg) or (None, None)
    return datasets.loaders(cfg, datasets.input_shape(cfg), rank=ctx.rank, world_size=ctx.world_size,
                            train_transform=transforms[0], test_transform=transforms[1])


def build(the_plan: Plan, cfg: RunConfig, ctx: loop.RunContext, repeat: int,
           counter: progress.RepeatProgress, run_id: str = "") -> Built:
    """An arm ready to measure: seeded, loaders, the technique's setup and preparation, its Training."""
    seed_everything(None if cfg.seed is None else cfg.seed + repeat)
    pipeline = the_plan.pipeline
    loaders = loaders_for(the_plan, cfg, ctx)
    torch_state.fresh_compiler()  # the process's torch settings are the unit's (harness/execute.py)
    trainable = pipeline.setup(cfg, ctx)
    prep = Preparation(loaders, ctx, lambda t: loop.train(t, loaders, warmup_config(cfg), ctx))
    trainable = pipeline.before_training(trainable, prep, cfg, ctx)
    hooks = [*runner_hooks(pipeline, cfg, ctx, repeat, run_id, datasets.fingerprint(cfg, loaders)), counter]
    training = loop.Training(trainable, loaders, cfg, ctx, hooks=hooks)
    return Built(the_plan, cfg, trainable, loaders, training, counter)


def runner_hooks(pipeline, cfg: RunConfig, ctx: loop.RunContext, repeat: int = 0, run_id: str = "",
                 data: str = "") -> list[loop.Hooks]:
    """Checkpoints, for pipelines that declare them (Supports.checkpoints) when the run names a folder; their
    markers keep `run_id`, so a resumed record names the run it continues, and the data's fingerprint."""
    opts = cfg.options
    if not pipeline.supports.checkpoints or not opts.checkpoint_dir:
        return []
    return [resume.CheckpointHooks(
        Path(opts.checkpoint_dir), opts.checkpoint_every, ctx.is_main, every_steps=opts.checkpoint_every_steps,
        manifest={**checkpoint.identity(cfg, ctx.world_size, repeat, data), "run_id": run_id}, rank=ctx.rank,
        barrier=collectives.barrier_if_initialized, agree=collectives.agree_if_initialized,
        gather=collectives.gather_objects, any_world=opts.checkpoint_any_world)]
