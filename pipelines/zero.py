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
The claim is not taken from the stage number: core/distributed/sharding.py measures the bytes each rank holds.

The note's own config (arm deepspeed-note) adds two DeepSpeed keys the stage arms leave at 1 and fp32:
`gradient_accumulation_steps` (accum_steps) with the global `train_batch_size` (train_batch), and `fp16`
(precision). DeepSpeed does the accumulation itself, as in the note's snippet: every loop step is one
micro-batch through engine(x), engine.backward(loss) (which divides the loss by accum_steps) and
engine.step(), and the engine steps the optimizer, and zeroes the gradients, only on every accum_steps-th
micro-batch (the accumulation boundary). DeepSpeed requires train_batch_size = micro-batch x
accum_steps x ranks, and the loader's batch per rank (--batch-size) is that micro-batch. fp16 runs on
CUDA only: DeepSpeed's CPU accelerator refuses it where oneDNN has no fp16 (precision=auto: fp16 on
CUDA, fp32 on CPU, said in the record).
"""

from __future__ import annotations

import importlib.util
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

from pipelines.core.train import models
from pipelines.core.harness.pipeline import (
    BACKENDS, ConfigError, DistOptions, Hooks, Needs, NotRunnable, Supports, Trainable, TrainingPipeline
)
from pipelines.core.distributed.sharding import RankBytes
from pipelines.core.train.steps import plain_step
from pipelines.core.distributed.sharded import GatherFullCopy, GatherPartitioned, import_deepspeed


@dataclass(frozen=True)
class Options(DistOptions):
    impl: Literal["deepspeed", "torch"] = "deepspeed"
    stage: Annotated[int, click.IntRange(min=0, max=3)] = 0  # ZeRO stage; torch: 0 DDP, 1 ZeRO-R, 2-3 FSDP2
    offload: bool = False  # optimizer state (+ stage 3 parameters) in host memory
    bucket_elements: Annotated[int, click.IntRange(min=1)] = 2**22  # DeepSpeed's communication buckets
    # DeepSpeed's gradient_accumulation_steps: micro-batches (loop steps) per optimizer step
    accum_steps: Annotated[int, click.IntRange(min=1)] = 1
    # DeepSpeed's train_batch_size, the global batch of one optimizer step; 0: --batch-size x accum_steps x
    # ranks. Set, it fixes the micro-batch per rank (train_batch / (accum_steps x ranks)) at bench and book
    # scale; smoke scale runs the pipeline's tiny batch instead and says so in the record.
    train_batch: Annotated[int, click.IntRange(min=0)] = 0
    precision: Literal["fp32", "fp16", "auto"] = "fp32"  # auto: fp16 on CUDA (the note's), fp32 on CPU


def fp16_on(device: torch.device, opts: Options) -> bool:
    """Whether DeepSpeed's fp16 is enabled: precision=fp16, or auto on a CUDA device."""
    return opts.precision == "fp16" or (opts.precision == "auto" and device.type == "cuda")


def batches(cfg, opts: Options, world_size: int) -> tuple[int, int]:
    """(train_batch_size, micro-batch per rank) for DeepSpeed: train_batch = micro x accum_steps x ranks.
    The micro-batch is the loader's batch per rank (--batch-size); a set train_batch must agree with it
    (ConfigError naming the values and the fix). At smoke scale the pipeline's tiny batch stands in."""
    per_micro = opts.accum_steps * world_size  # micro-batches in one optimizer step, over all ranks
    if not opts.train_batch or cfg.scale == "smoke":
        return cfg.batch_size * per_micro, cfg.batch_size
    shape = f"accum_steps {opts.accum_steps} x {world_size} ranks = {per_micro}"
    if opts.train_batch % per_micro:
        ranks = opts.train_batch // opts.accum_steps
        fix = (f"start a number of ranks that divides {ranks} (NPROC)" if opts.train_batch % opts.accum_steps == 0
               else f"set -o accum_steps to a divisor of {opts.train_batch}")
        raise ConfigError(f"option train_batch={opts.train_batch} is not divisible by {shape}, so DeepSpeed "
                          f"has no whole micro-batch per rank: {fix}, or set -o train_batch to a multiple of "
                          f"{per_micro}")
    micro = opts.train_batch // per_micro
    if cfg.batch_size != micro:
        raise ConfigError(f"option train_batch={opts.train_batch} with {shape} needs a micro-batch of {micro} "
                          f"per rank, but --batch-size is {cfg.batch_size}: pass --batch-size {micro}, or "
                          f"-o train_batch={cfg.batch_size * per_micro}")
    return opts.train_batch, micro


def adamw(params, cfg) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def deepspeed_config(cfg, opts: Options, world_size: int, device: torch.device) -> dict:
    """The DeepSpeed config for one arm: the same update as the DDP arm (AdamW, no clipping). Buckets are
    bounded (DeepSpeed's default of 5e8 elements is a 2 GB fp32 buffer at stage 3, more than a small model)
    and no parameter stays whole at stage 3 (DeepSpeed keeps parameters under 1e5 elements unpartitioned
    by default: at smoke scale, all of them). The batch keys and fp16 are the note's (arm deepspeed-note:
    train_batch_size 256, gradient_accumulation_steps 4, fp16 on CUDA)."""
    train_batch, micro = batches(cfg, opts, world_size)
    zero = {"stage": opts.stage, "reduce_bucket_size": opts.bucket_elements,
            "allgather_bucket_size": opts.bucket_elements, "stage3_prefetch_bucket_size": opts.bucket_elements,
            "stage3_param_persistence_threshold": 0}
    if opts.offload:
        zero["offload_optimizer"] = {"device": "cpu"}
        if opts.stage == 3:
            zero["offload_param"] = {"device": "cpu"}
    return {"train_batch_size": train_batch, "train_micro_batch_size_per_gpu": micro,
            "gradient_accumulation_steps": opts.accum_steps, "fp16": {"enabled": fp16_on(device, opts)},
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


class EngineSteps(Hooks):
    """What the engine did with the loop's micro-batches: its optimizer steps (global_steps, counted at
    each accumulation boundary), micro-batches and fp16 overflow skips, into the record."""

    def __init__(self, engine):
        self.engine = engine

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        trainable.metrics.update(optimizer_steps=self.engine.global_steps, micro_steps=self.engine.micro_steps,
                                 skipped_steps=self.engine.skipped_steps,
                                 gradient_accumulation_steps=self.engine.gradient_accumulation_steps(),
                                 train_batch_size=self.engine.train_batch_size())


def deepspeed_arm(model, cfg, opts: Options, ctx) -> Trainable:
    deepspeed = import_deepspeed(ctx.device)
    config = deepspeed_config(cfg, opts, ctx.world_size, ctx.device)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    dtype = torch.float16 if engine.fp16_enabled() else torch.float32  # fp16: the engine cast the model

    def step(x, y):  # one micro-batch, as the note's loop: forward, engine.backward, engine.step
        loss = F.cross_entropy(engine(x.to(dtype)).float(), y)
        # divides the loss by accum_steps; stages 1-3: each rank keeps its partition's gradients, summed
        engine.backward(loss)
        # on every accum_steps-th call only (the boundary): each rank updates its partition (fp16: unscaled,
        # or skipped on overflow) and zeroes the gradients; stages 1-2 then all-gather the parameters
        engine.step()
        return loss

    def predict(x):  # rank 0's evaluation: the model as it is then (stage 3: GatherPartitioned's fp32 copy)
        return trainable.model(x.to(next(trainable.model.parameters()).dtype))

    def held():  # stage 3: each parameter's own partition lives in ds_tensor
        return [t for p in engine.module.parameters() for t in (p, getattr(p, "ds_tensor", None))]

    hooks: list[Hooks] = [RankBytes(held, engine.module, engine.optimizer, ctx), EngineSteps(engine)]
    if opts.stage == 3:
        hooks.append(GatherPartitioned(deepspeed, engine, cfg, ctx))
    accelerator = deepspeed.accelerator.get_accelerator()
    notes = [f"DeepSpeed {deepspeed.__version__}, accelerator {accelerator.device_name()}, "
             f"communication over {accelerator.communication_backend_name()}"]
    notes += precision_notes(opts, ctx.device, accelerator) + batch_notes(opts, config, ctx.world_size)
    trainable = Trainable(engine.module, step, predict=predict, count_flops=False, hooks=hooks, notes=notes,
                          artifacts={"deepspeed_config": config})  # the config DeepSpeed ran, in the record
    return trainable


def precision_notes(opts: Options, device: torch.device, accelerator) -> list[str]:
    if opts.precision == "auto" and device.type != "cuda":
        return [f"precision=auto on {device.type}: fp16 is not run here, the arm trains in fp32. The note's fp16 "
                f"is for GPUs; DeepSpeed's CPU accelerator enables fp16 only where oneDNN has fp16 kernels "
                f"(is_fp16_supported() is {bool(accelerator.is_fp16_supported())} here) and its engine refuses "
                f"it otherwise ('Type fp16 is not supported on your device.'); --device cuda runs fp16"]
    if fp16_on(device, opts):
        return ["fp16 (DeepSpeed's fp16 with dynamic loss scaling; skipped_steps counts overflow steps); "
                "DeepSpeed keeps the fp32 master copy of each rank's partition"]
    return []


def batch_notes(opts: Options, config: dict, world_size: int) -> list[str]:
    train_batch, micro, accum = (config["train_batch_size"], config["train_micro_batch_size_per_gpu"],
                                 config["gradient_accumulation_steps"])
    notes = []
    if accum > 1:
        notes.append(f"DeepSpeed accumulates: train_batch_size {train_batch} = micro-batch {micro} x "
                     f"gradient_accumulation_steps {accum} x {world_size} ranks; each loop step is one "
                     f"micro-batch, the optimizer steps on every {accum}th (metrics.optimizer_steps)")
    if opts.train_batch and train_batch != opts.train_batch:
        notes.append(f"smoke scale: train_batch_size {train_batch} (the smoke batch {micro} x {accum} x "
                     f"{world_size} ranks) stands in for train_batch {opts.train_batch}, which bench and book "
                     "scale run")
    return notes


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


class Zero(TrainingPipeline[Options]):
    Options = Options
    supports = Supports(backends=BACKENDS)  # DeepSpeed reuses the Session's process group
    needs = (Needs("ZeRO stages 1-3 gather parameters and reduce-scatter gradients", when={"impl": "deepspeed",
                   "stage": (1, 2, 3)}, collectives=("all_gather", "reduce_scatter")),
             Needs("FSDP2 gathers parameters and reduce-scatters gradients", when={"impl": "torch", "stage": (2, 3)},
                   collectives=("all_gather", "reduce_scatter")))
    smoke_settings = {"model": "vit_tiny", "batch_size": 4, "num_workers": 0}

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        if opts.offload and opts.stage == 0:
            raise ConfigError("option offload=true needs a ZeRO stage of 1 or more (-o stage=1|2|3): stage 0 "
                              "keeps nothing sharded to offload")
        if opts.offload and opts.impl == "torch" and opts.stage == 1:
            raise ConfigError("option offload=true with impl=torch needs stage 2 or 3 (FSDP2's "
                              "CPUOffloadPolicy); ZeroRedundancyOptimizer has no offload")
        if opts.impl == "torch" and (opts.accum_steps > 1 or opts.train_batch or opts.precision != "fp32"):
            raise ConfigError("options accum_steps, train_batch and precision are DeepSpeed config keys: they "
                              "need impl=deepspeed (the torch arms train fp32, one optimizer step per batch)")
        if ctx.world_size < 2:
            raise NotRunnable(f"{cfg.experiment} shards over ranks: start it with 2 or more processes: "
                              f"NPROC=2 accel launch {cfg.experiment}")

    def skip(self, cfg, ctx) -> str | None:
        """Why this arm cannot run here. A note-config arm whose global batch this rank count cannot split is
        skipped with the fix (not refused: a launch of 4 ranks still runs every other arm); run
        alone, every arm skipped, it is refused in one line with the same reason."""
        opts: Options = cfg.options
        if opts.impl != "deepspeed":
            return None
        if ctx.world_size >= 2:
            try:
                batches(cfg, opts, ctx.world_size)  # train_batch = micro x accum_steps x ranks
            except ConfigError as exc:
                return str(exc)
        if (missing := deepspeed_missing(ctx.device)) is not None:
            return missing
        if opts.precision == "fp16" and ctx.device.type == "cpu" and \
                not import_deepspeed(ctx.device).accelerator.get_accelerator().is_fp16_supported():
            return ("precision=fp16: DeepSpeed's CPU accelerator has no fp16 on this CPU (oneDNN without fp16 "
                    "kernels) and its engine refuses it; run it with --device cuda, or -o precision=auto "
                    "(fp16 on CUDA, fp32 here)")
        return None

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        trainable = (deepspeed_arm if opts.impl == "deepspeed" else torch_arm)(model, cfg, opts, ctx)
        if opts.offload and ctx.device.type == "cpu":
            trainable.notes.append("offload on a CPU run: the offloaded tensors move to host memory, where "
                                   "everything already lives; the arm shows the mechanism and its cost, not "
                                   "a saving")
        return trainable


PIPELINE = Zero()
