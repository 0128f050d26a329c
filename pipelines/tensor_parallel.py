"""Tensor parallelism (lecture note): each transformer block's layers split across ranks, Megatron style.

`torch.distributed.tensor.parallel` (DTensor) does the splitting; this file only says where:

- Attention: `q`, `k`, `v` are ColwiseParallel (each rank holds heads / degree of the output features),
  `out` is RowwiseParallel (each rank holds the matching input features; the partial sums are
  all-reduced). Each rank therefore runs attention for its own heads only.
- MLP: `up` ColwiseParallel, `down` RowwiseParallel: the hidden activation never leaves its rank.
- One all-reduce per sub-layer in the forward pass and one in the backward pass; weights, gradients
  and Adam state of the split layers are 1/degree per rank. Norms, the patch embedding and the head
  stay replicated (small, and every rank computes them on the same activations).

Tensor parallelism splits the layers, not the data: every rank of the group must see the same samples.
The runner still gives each rank its own shard (DistributedSampler); the step gathers the shards into
the global batch, so both arms train on global batch = per-rank batch x ranks. The other arm,
`replicate`, is data parallelism (DDP from pipelines/data_parallel.py): the full block on every rank, its own
shard each. The record carries parameter bytes per rank for both and the step time.

Degree = world size (a 1-D device mesh over all ranks); it must divide the heads and the MLP width.
The same code runs over NCCL on GPUs (`--device cuda -o backend=nccl`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as tdist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel as DDP

from pipelines.core.distributed import collectives
from pipelines.core.distributed.sharded import GatherFullCopy
from pipelines.core.train import models
from pipelines.core.train.architectures import PatchTransformer
from pipelines.core.harness.pipeline import (
    BACKENDS, ConfigError, DistOptions, Needs, Supports, Trainable, TrainingPipeline
)
from pipelines.core.train.steps import plain_step


@dataclass(frozen=True)
class Options(DistOptions):
    parallel: Literal["replicate", "tensor"] = "tensor"


# Per transformer block: which layer is split along its output (colwise) or input (rowwise) features.
PLAN = {"attention.q": ColwiseParallel(), "attention.k": ColwiseParallel(), "attention.v": ColwiseParallel(),
        "attention.out": RowwiseParallel(), "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}


def parallelize(model: PatchTransformer, degree: int, device: torch.device) -> PatchTransformer:
    """Split every block over a 1-D mesh of `degree` ranks (the default process group's ranks)."""
    mesh = init_device_mesh(device.type, (degree,))
    for block in model.blocks:
        parallelize_module(block, mesh, PLAN)
    return model


def local_bytes(parameters) -> int:
    """Bytes of parameters this rank holds: a DTensor's local shard, a plain tensor whole."""
    return sum((p.to_local() if isinstance(p, DTensor) else p).nbytes for p in parameters)


def param_metrics(model: nn.Module, full: dict[str, int], degree: int) -> dict[str, float | int]:
    """This rank's parameter bytes beside the unsplit model's, for the whole model and the blocks alone."""
    held = local_bytes(model.parameters())
    blocks = local_bytes(model.blocks.parameters())
    return {"tp_degree": degree, "param_bytes_per_rank": held, "param_bytes_full": full["model"],
            "param_bytes_fraction": round(held / full["model"], 4), "block_param_bytes_per_rank": blocks,
            "block_param_bytes_full": full["blocks"], "block_param_bytes_fraction": round(blocks / full["blocks"], 4)}


class TensorParallel(TrainingPipeline[Options]):
    Options = Options
    supports = Supports(backends=BACKENDS)  # DTensor collectives over the Session's group
    smoke_settings = {"model": "transformer_tiny", "batch_size": 8, "num_workers": 0}

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        model = models.splittable(cfg.model, cfg.head_classes)
        degree = ctx.world_size
        if opts.parallel == "tensor" and degree > 1:
            hidden = model.blocks[0].mlp.up.out_features
            if model.heads % degree or hidden % degree:
                raise ConfigError(f"tensor-parallel degree {degree} (one shard per rank) does not divide model "
                                  f"{cfg.model}'s {model.heads} attention heads and MLP width {hidden}; start a "
                                  f"number of ranks that divides both (e.g. NPROC=2)")

    needs = (Needs("tensor parallelism splits layers across ranks", when={"parallel": "tensor"}, min_ranks=2),)

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        full = {"model": local_bytes(model.parameters()), "blocks": local_bytes(model.blocks.parameters())}
        if opts.parallel == "replicate":
            parallel = DDP(model) if tdist.is_initialized() else model  # replicas across ranks; one process: plain
            optimizer = torch.optim.AdamW(parallel.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            return Trainable(model, plain_step(parallel, optimizer), optimizer=optimizer,
                             metrics=param_metrics(model, full, 1),
                             notes=["replicate: every rank holds the full model and trains on its own shard (DDP)"])
        parallelize(model, ctx.world_size, ctx.device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            x, y = collectives.global_batch(x), collectives.global_batch(y)  # same samples on every rank of the group
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DTensor all-reduces the row-parallel outputs' gradients' partial sums
            optimizer.step()
            return loss

        notes = [f"tensor parallel over {ctx.world_size} ranks: every rank runs the global batch through its "
                 "shard of each block (the ranks' sampler shards are all-gathered)"]
        return Trainable(model, step, optimizer=optimizer, count_flops=False,  # the split forward is collective
                         metrics=param_metrics(model, full, ctx.world_size), notes=notes,
                         hooks=[GatherFullCopy(model, cfg, ctx)])  # rank 0 evaluates a gathered copy


PIPELINE = TensorParallel()
