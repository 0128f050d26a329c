"""The collectives the harness and the techniques call on the joined process group, each a no-op for a single
process: every rank's object gathered, every rank's batch gathered, rank 0's value given to all, a barrier.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as tdist


def gather_objects(obj: Any) -> list[Any]:
    if not (tdist.is_available() and tdist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, obj)
    return out


def global_batch(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's batch, concatenated in rank order, on every rank (one process: the batch itself).

    Data parallelism gives each rank its own shard; model-parallel techniques (tensor, pipeline) need
    every rank of the group to see the same samples. Gathering the shards keeps the runner's sampler
    and accounting (global batch = per-rank batch x world size) the same for every technique."""
    if not (tdist.is_available() and tdist.is_initialized()):
        return tensor
    tensor = tensor.contiguous()
    out = tensor.new_empty((tensor.shape[0] * tdist.get_world_size(), *tensor.shape[1:]))
    # torch 2.14's name; torch 2.8 (the cpu-intel image, .venv-ipex) has only all_gather_into_tensor
    gather = getattr(tdist, "all_gather_single", None) or tdist.all_gather_into_tensor
    gather(out, tensor)
    return out


def agree_if_initialized(value: Any) -> Any:
    """Rank 0's `value` on every rank when a process group exists (a resume: the checkpoint rank 0 picked)."""
    if not (tdist.is_available() and tdist.is_initialized()):
        return value
    box = [value]
    tdist.broadcast_object_list(box, src=0)
    return box[0]


def barrier_if_initialized() -> None:
    """A barrier when a process group exists (checkpoint hooks: no rank runs ahead of a checkpoint)."""
    if tdist.is_available() and tdist.is_initialized():
        tdist.barrier()
