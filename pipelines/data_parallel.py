"""Chapters 8-11 and the talk's step 05 (DDP): data-parallel training, DDP or FSDP, over any backend.

The chapter is not in this file: who starts the processes (torchrun, mpirun, srun) is the launcher,
which collective library moves the gradients (gloo, ccl, nccl, mpi) is the `backend` option, and
where it runs is the container. What is here is the technique itself:

- DDP keeps a full model copy per rank and all-reduces (averages) gradients during backward, so
  every rank takes the same optimizer step. The optimizer is built on the wrapped model's parameters.
- FSDP shards parameters, gradients and optimizer state across ranks: each transformer block is
  gathered just before it runs and freed after. bf16 here is FSDP's own mixed-precision policy
  (parameters cast to bf16 for compute, gradients reduced in fp32).
- `strategy=dp` is the older single-process nn.DataParallel, the lecture note's contrast to DDP: one
  process drives `ranks` GPUs, scattering each batch, replicating the model every step and gathering
  outputs on the first GPU. It needs 2+ CUDA devices in one process; elsewhere the arm is skipped.
- Each rank reads a disjoint shard of the training set (DistributedSampler; the loop calls set_epoch
  so each epoch reshuffles differently on every rank, when shuffling is on).
- The per-rank batch is the catalog's batch size (faithful to the book: the global batch grows with
  the number of ranks and the learning rate is not scaled). `lr_scaling=linear` multiplies the
  learning rate by the world size instead (the controlled variant).

Started as one plain process (`accel run`), it trains the same model without a wrapper: the
1-process reference the distributed runs are compared against.

The talk's step 05 also did, inside its clock, what its train() did besides the step
(core/train/bookkeeping.py): a validation pass after every epoch over each rank's share of the held-out
images 45,000-49,999 (through the DDP wrapper, under the same bf16 autocast), a torchmetrics train accuracy
from every batch's argmax and the loss read every 300 batches; the catalog's talk entry turns them on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import click
import torch
import torch.distributed as tdist
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from pipelines.core.train import bookkeeping, models
from pipelines.core.harness.pipeline import (
    BACKENDS, BookkeepingOptions, CheckpointOptions, ConfigError, DistOptions, Needs, Supports, Trainable,
    TrainingPipeline
)
from pipelines.core.distributed.sharded import GatherFullCopy
from pipelines.core.train.steps import StepLrEachEpoch


@dataclass(frozen=True)
class Options(DistOptions, CheckpointOptions, BookkeepingOptions):
    strategy: Literal["ddp", "fsdp", "dp"] = "ddp"
    precision: Literal["fp32", "bf16"] = "fp32"
    lr_scaling: Literal["none", "linear"] = "none"
    lr_gamma: Annotated[float, click.FloatRange(min=0, max=1)] = 0.0  # ExponentialLR per epoch; 0: none
    ranks: Annotated[int, click.IntRange(min=0)] = 0  # processes this variant needs (0: any); dp: its GPUs
    matmul_precision: Literal["highest", "high", "medium"] = "highest"  # the talk's scripts: medium


def wrap(model: torch.nn.Module, opts: Options, ctx) -> torch.nn.Module:
    """The parallel wrapper: DDP (replicas + gradient all-reduce), FSDP (sharded blocks) or DataParallel."""
    if opts.strategy == "dp":  # one process, several GPUs: needs no process group
        return torch.nn.DataParallel(model, device_ids=list(range(opts.ranks or torch.cuda.device_count())))
    if not (tdist.is_available() and tdist.is_initialized()):
        return model  # one plain process: the reference run
    if opts.strategy == "ddp":
        return DDP(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if opts.precision == "bf16" else MixedPrecisionPolicy()
    for block in models.transformer_blocks(model):
        fully_shard(block, mp_policy=policy)
    return fully_shard(model, mp_policy=policy)


def dataparallel_skip(cfg, opts: Options, ctx) -> str | None:
    """nn.DataParallel scatters over 2+ GPUs: why this arm cannot run on this machine's GPUs, or None."""
    wanted, gpus = max(opts.ranks, 2), torch.cuda.device_count()
    if gpus < wanted:
        return (f"nn.DataParallel needs {wanted} CUDA devices in one process; this machine has {gpus}; on a "
                f"machine with {wanted}+ GPUs: accel run {cfg.experiment} --variant {cfg.variant} --device cuda")
    return None


class DataParallel(TrainingPipeline[Options]):
    Options = Options
    supports = Supports(backends=BACKENDS, checkpoints=True)  # DDP/FSDP over any Session backend; resumable
    process_options = ("matmul_precision",)  # matmul precision: the engine sets it for the process
    smoke_settings = {"batch_size": 8}

    # An arm sized for another process count (ch9's ranks=N, ch10's gpus=N) is skipped, so one launch runs the
    # arm that fits it; a launch where no arm fits is refused with the same reason.
    needs = (Needs("", when={"strategy": ("ddp", "fsdp")}, ranks_option="ranks"),
             Needs("nn.DataParallel drives its GPUs from one process", when={"strategy": "dp"}, device="cuda",
                   max_ranks=1),
             Needs("FSDP gathers each block's parameters and reduce-scatters its gradients",
                   when={"strategy": "fsdp"}, collectives=("all_gather", "reduce_scatter")))

    def skip(self, cfg, ctx) -> str | None:
        opts: Options = cfg.options
        return dataparallel_skip(cfg, opts, ctx) if opts.strategy == "dp" else None

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        if opts.strategy == "fsdp" and opts.checkpoint_dir:
            raise ConfigError("checkpoints are written for strategy=ddp only (FSDP state is sharded); "
                              "drop -o checkpoint_dir=... or use -o strategy=ddp")

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        fsdp = opts.strategy == "fsdp" and tdist.is_initialized()
        parallel = wrap(model, opts, ctx)
        lr = cfg.lr * (ctx.world_size if opts.lr_scaling == "linear" else 1)
        optimizer = torch.optim.Adam(parallel.parameters(), lr=lr, weight_decay=cfg.weight_decay)
        autocast = opts.precision == "bf16" and not fsdp  # FSDP's policy casts instead

        def forward(x):
            with torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=autocast):
                return parallel(x).float()  # fp32 logits and loss: Fabric (the talk) casts outputs too

        observe, hooks = bookkeeping.source_loop(opts, cfg, ctx, forward=forward)

        def step(x, y):
            logits = forward(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP: gradients averaged across ranks here; FSDP: reduce-scattered
            optimizer.step()
            if observe is not None:  # the talk's per-batch bookkeeping, inside the step
                observe(logits, y, loss)
            return loss

        if opts.lr_gamma:
            hooks.append(StepLrEachEpoch(torch.optim.lr_scheduler.ExponentialLR(optimizer, opts.lr_gamma)))
        if fsdp:
            hooks.append(GatherFullCopy(parallel, cfg, ctx))
        notes = [f"nn.DataParallel over {len(parallel.device_ids)} GPUs in one process"] if opts.strategy == "dp" \
            else [] if tdist.is_initialized() else ["one plain process: no DDP/FSDP wrapper (the reference run)"]
        return Trainable(model, step, optimizer=optimizer, notes=notes, hooks=hooks, count_flops=not fsdp)


PIPELINE = DataParallel()
