"""The lecture note's ZeRO (s004-deepspeed): what each rank holds under DDP, ZeRO stages 1-3 and CPU offload.

DDP keeps on every rank a full copy of the parameters, the gradients and the optimizer state (Adam: two
moments per parameter). ZeRO splits them over the N ranks instead: stage 1 the optimizer state (each
rank updates only its 1/N of the parameters, then they are all-gathered), stage 2 also the gradients
(reduce-scattered, so each rank keeps only the gradients of its part), stage 3 also the parameters
(each layer is gathered for its forward and backward and freed after). Offload moves the sharded
optimizer state (and, at stage 3, the parameters) to host memory.

Two implementations of the same stages, `impl`:
- `deepspeed`: `deepspeed.initialize` with a config dict built from these options (stage 0-3, offload;
  torch's AdamW in every arm through DeepSpeed's `torch_adam`, so the arms differ only in sharding).
  DeepSpeed runs on CPU processes through its CPU accelerator over Gloo (it JIT-builds one C++ op the
  first time, so it needs a compiler), and on GPUs over NCCL, same code.
- `torch`: the upstream equivalents: stage 0 = DistributedDataParallel (the reference every arm is
  compared with), 1 = ZeroRedundancyOptimizer over DDP, 2 = FSDP2 `fully_shard` per block with
  reshard_after_forward=False (parameters stay whole from forward to backward; gradients and optimizer
  state sharded), 3 = FSDP2 with resharding after forward, offload = FSDP2's CPUOffloadPolicy.
The claim is not taken from the stage number: core/sharding.py measures the bytes each rank holds.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Annotated, Literal

import click
import torch
import torch.nn.functional as F
from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from pipelines.core import models
from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.loop import Hooks, Trainable
from pipelines.core.options import DistOptions
from pipelines.core.pipeline import TrainingPipeline
from pipelines.core.sharding import RankBytes
from pipelines.core.steps import plain_step
from pipelines.ddp import GatherFullCopy


@dataclass(frozen=True)
class Options(DistOptions):
    impl: Literal["deepspeed", "torch"] = "deepspeed"
    stage: Annotated[int, click.IntRange(min=0, max=3)] = 0  # ZeRO stage; torch: 0 DDP, 1 ZeRO-R, 2-3 FSDP2
    offload: bool = False  # optimizer state (+ stage 3 parameters) in host memory
    bucket_elements: Annotated[int, click.IntRange(min=1)] = 2**22  # DeepSpeed's communication buckets


def adamw(params, cfg) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def deepspeed_config(cfg, opts: Options) -> dict:
    """The DeepSpeed config for one arm: the same update as the DDP arm (AdamW, no clipping). Buckets are
    bounded (DeepSpeed's default of 5e8 elements is a 2 GB fp32 buffer at stage 3, more than a small model)
    and no parameter stays whole at stage 3 (DeepSpeed keeps parameters under 1e5 elements unpartitioned
    by default: at smoke scale, all of them)."""
    zero = {"stage": opts.stage, "reduce_bucket_size": opts.bucket_elements,
            "allgather_bucket_size": opts.bucket_elements, "stage3_prefetch_bucket_size": opts.bucket_elements,
            "stage3_param_persistence_threshold": 0}
    if opts.offload:
        zero["offload_optimizer"] = {"device": "cpu"}
        if opts.stage == 3:
            zero["offload_param"] = {"device": "cpu"}
    return {"train_micro_batch_size_per_gpu": cfg.batch_size, "gradient_accumulation_steps": 1,
            "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                                                      "torch_adam": True}},
            "gradient_clipping": 0.0,  # DeepSpeed 0.19 clips to norm 1.0 unless told; DDP does not clip
            "zero_optimization": zero, "steps_per_print": 10**9}


def deepspeed_missing(device: torch.device) -> str | None:
    """Why DeepSpeed cannot run here, or None."""
    if importlib.util.find_spec("deepspeed") is None:
        return "DeepSpeed is not installed: pip install -e '.[zero]' (make venv installs it)"
    if device.type == "cpu" and shutil.which(os.environ.get("CXX", "c++")) is None:
        return ("DeepSpeed's CPU accelerator JIT-builds its shared-memory op with a C++ compiler, and none is "
                "on PATH (apt-get install g++)")
    return None


def import_deepspeed(device: torch.device):
    """DeepSpeed, with its accelerator matching --device (DS_ACCELERATOR, read once at import)."""
    wanted = os.environ.setdefault("DS_ACCELERATOR", device.type)
    if wanted != device.type:
        raise ConfigError(f"DS_ACCELERATOR={wanted} does not match --device {device.type}; unset DS_ACCELERATOR")
    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)  # it logs its whole config on every rank
    return deepspeed


class GatherPartitioned(Hooks):
    """ZeRO-3: gather the partitioned parameters on every rank (a collective) into a full copy on rank 0,
    so rank 0 can evaluate alone."""

    def __init__(self, deepspeed, engine, cfg, ctx):
        self.deepspeed, self.engine, self.cfg, self.ctx = deepspeed, engine, cfg, ctx

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        copy = models.build(self.cfg.model, classes=self.cfg.head_classes)
        module = self.engine.module
        with self.deepspeed.zero.GatheredParameters(list(module.parameters())):
            if self.ctx.is_main:
                copy.load_state_dict(module.state_dict())
        trainable.model = copy.to(self.ctx.device)


def deepspeed_arm(model, cfg, opts: Options, ctx) -> Trainable:
    deepspeed = import_deepspeed(ctx.device)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=deepspeed_config(cfg, opts))

    def step(x, y):
        loss = F.cross_entropy(engine(x), y)
        engine.backward(loss)  # stage 1-3: each rank keeps the averaged gradients of its own partition
        engine.step()  # each rank updates its partition; stages 1-2 then all-gather the parameters
        return loss

    def held():  # stage 3: each parameter's own partition lives in ds_tensor
        return [t for p in engine.module.parameters() for t in (p, getattr(p, "ds_tensor", None))]

    hooks: list[Hooks] = [RankBytes(held, engine.module, engine.optimizer, ctx)]
    if opts.stage == 3:
        hooks.append(GatherPartitioned(deepspeed, engine, cfg, ctx))
    accelerator = deepspeed.accelerator.get_accelerator()
    notes = [f"DeepSpeed {deepspeed.__version__}, accelerator {accelerator.device_name()}, "
             f"communication over {accelerator.communication_backend_name()}"]
    return Trainable(engine.module, step, count_flops=False, hooks=hooks, notes=notes)


def torch_arm(model, cfg, opts: Options, ctx) -> Trainable:
    devices = [ctx.device.index] if ctx.device.type == "cuda" else None
    if opts.stage <= 1:
        parallel = DDP(model, device_ids=devices)
        optimizer = adamw(parallel.parameters(), cfg) if opts.stage == 0 else ZeroRedundancyOptimizer(
            parallel.parameters(), optimizer_class=torch.optim.AdamW, lr=cfg.lr, weight_decay=cfg.weight_decay)
        bytes_held = RankBytes(model.parameters, model, optimizer, ctx)
        return Trainable(model, plain_step(parallel, optimizer), hooks=[bytes_held])
    offload = CPUOffloadPolicy(pin_memory=ctx.device.type == "cuda") if opts.offload else OffloadPolicy()
    for unit in [*models.transformer_blocks(model), model]:  # each block its own FSDP unit
        fully_shard(unit, reshard_after_forward=opts.stage == 3, offload_policy=offload)
    optimizer = adamw(model.parameters(), cfg)
    hooks = [RankBytes(model.parameters, model, optimizer, ctx), GatherFullCopy(model, cfg, ctx)]
    return Trainable(model, plain_step(model, optimizer), hooks=hooks, count_flops=False)


class Zero(TrainingPipeline):
    Options = Options
    smoke_settings = {"model": "vit_tiny", "batch_size": 4, "num_workers": 0}

    def check(self, cfg, opts: Options, ctx) -> None:
        if opts.offload and opts.stage == 0:
            raise ConfigError("option offload=true needs a ZeRO stage of 1 or more (-o stage=1|2|3): stage 0 "
                              "keeps nothing sharded to offload")
        if opts.offload and opts.impl == "torch" and opts.stage == 1:
            raise ConfigError("option offload=true with impl=torch needs stage 2 or 3 (FSDP2's "
                              "CPUOffloadPolicy); ZeroRedundancyOptimizer has no offload")
        if ctx.world_size < 2:
            raise NotRunnable(f"{cfg.experiment} shards over ranks: start it with 2 or more processes, e.g. "
                              f"`make {cfg.experiment} NPROC=2`")

    def skip(self, cfg, opts: Options, ctx) -> str | None:
        return deepspeed_missing(ctx.device) if opts.impl == "deepspeed" else None

    def setup(self, cfg, opts: Options, ctx) -> Trainable:
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        trainable = (deepspeed_arm if opts.impl == "deepspeed" else torch_arm)(model, cfg, opts, ctx)
        if opts.offload and ctx.device.type == "cpu":
            trainable.notes.append("offload on a CPU run: the offloaded tensors move to host memory, where "
                                   "everything already lives; the arm shows the mechanism and its cost, not "
                                   "a saving")
        return trainable


PIPELINE = Zero()
