"""Chapters 8-11 and the talk's steps 04/05: data-parallel training, DDP or FSDP, over any backend.

The chapter is not in this file: who starts the processes (torchrun, mpirun, srun) is the launcher,
which collective library moves the gradients (gloo, ccl, nccl, mpi) is the `backend` option, and
where it runs is the container. What is here is the technique itself:

- DDP keeps a full model copy per rank and all-reduces (averages) gradients during backward, so
  every rank takes the same optimizer step. The optimizer is built on the wrapped model's parameters.
- FSDP shards parameters, gradients and optimizer state across ranks: each transformer block is
  gathered just before it runs and freed after. bf16 here is FSDP's own mixed-precision policy
  (parameters cast to bf16 for compute, gradients reduced in fp32).
- Each rank reads a disjoint shard of the training set (DistributedSampler; the loop calls set_epoch
  so each epoch reshuffles differently on every rank, when shuffling is on).
- The per-rank batch is the catalog's batch size (faithful to the book: the global batch grows with
  the number of ranks and the learning rate is not scaled). `lr_scaling=linear` multiplies the
  learning rate by the world size instead (the controlled variant).

Started as one plain process (`accel run`), it trains the same model without a wrapper: the
1-process reference the distributed runs are compared against.
"""

from __future__ import annotations

import torch
import torch.distributed as tdist
import torch.nn.functional as F

from pipelines.core import dist, loop, models
from pipelines.core.config import ConfigError

OPTIONS = {"backend": "gloo", "strategy": "ddp", "precision": "fp32", "lr_scaling": "none",
           "lr_gamma": 0.0, "checkpoint_dir": "", "checkpoint_every": 1, "timeout_s": 120.0,
           "ranks": 0, "threads": 0}
SMOKE_ARGS = {"batch_size": 8}
CHOICES = {"strategy": ("ddp", "fsdp"), "precision": ("fp32", "bf16"), "lr_scaling": ("none", "linear")}


def skip(cfg, ctx) -> str | None:
    """An arm sized for another process count (ch9's ranks=N, ch10's gpus=N) is recorded as skipped, so
    one launch runs the arm that fits it; a launch where no arm fits is refused with this reason."""
    ranks = cfg.options["ranks"]
    if ranks and ranks != ctx.world_size:
        return (f"variant {cfg.variant} needs {ranks} processes but this run has {ctx.world_size}; start it "
                f"with NPROC={ranks} (make cpu-ddp NPROC={ranks})")
    return None


def check(cfg, ctx) -> None:
    for key, allowed in CHOICES.items():
        if cfg.options[key] not in allowed:
            raise ConfigError(f"option {key}={cfg.options[key]!r} is unknown; choose one of: {', '.join(allowed)}")
    dist.check_backend(cfg.options["backend"], cfg.device)
    if cfg.options["strategy"] == "fsdp" and cfg.options["checkpoint_dir"]:
        raise ConfigError("checkpoints are written for strategy=ddp only (FSDP state is sharded); "
                          "drop -o checkpoint_dir=... or use -o strategy=ddp")


def wrap(model: torch.nn.Module, cfg, ctx) -> torch.nn.Module:
    """The parallel wrapper: DDP (replicas + gradient all-reduce) or FSDP (sharded blocks)."""
    if not (tdist.is_available() and tdist.is_initialized()):
        return model  # one plain process: the reference run
    if cfg.options["strategy"] == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if cfg.options["precision"] == "bf16" else MixedPrecisionPolicy()
    blocks = getattr(getattr(model, "encoder", None), "layers", [])  # transformer blocks (ViT), if any
    for block in blocks:
        fully_shard(block, mp_policy=policy)
    return fully_shard(model, mp_policy=policy)


def setup(cfg, ctx) -> loop.Trainable:
    if cfg.options["threads"]:  # Table 9.1: intra-op threads of this one process
        torch.set_num_threads(cfg.options["threads"])
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
    fsdp = cfg.options["strategy"] == "fsdp" and tdist.is_initialized()
    parallel = wrap(model, cfg, ctx)
    lr = cfg.lr * (ctx.world_size if cfg.options["lr_scaling"] == "linear" else 1)
    optimizer = torch.optim.Adam(parallel.parameters(), lr=lr, weight_decay=cfg.weight_decay)
    autocast = cfg.options["precision"] == "bf16" and not fsdp  # FSDP's policy casts instead

    def step(x, y):
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(parallel(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP: gradients averaged across ranks here; FSDP: reduce-scattered
        optimizer.step()
        return loss

    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, cfg.options["lr_gamma"]) \
        if cfg.options["lr_gamma"] else None
    notes = [] if tdist.is_initialized() else ["one plain process: no DDP/FSDP wrapper (the reference run)"]
    trainable = loop.Trainable(model, step, optimizer=optimizer, notes=notes,
                               on_epoch_end=(lambda epoch: scheduler.step()) if scheduler else None)
    if fsdp:  # sharded weights: gather a full copy on every rank so rank 0 can evaluate alone
        trainable.count_flops = False
        trainable.finish = lambda: _full_copy(trainable, parallel, cfg, ctx)
    return trainable


def _full_copy(trainable: loop.Trainable, sharded, cfg, ctx) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(sharded, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    copy = models.build(cfg.model, classes=cfg.head_classes)
    if ctx.is_main:
        copy.load_state_dict(state)
    trainable.model = copy.to(ctx.device)
    trainable.predict = None
