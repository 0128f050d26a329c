"""Memory measurements that mean the same on every device (the process-wide peak RSS does not:
variants run in one process, so a later variant's RSS peak includes an earlier variant's).

`saved_for_backward_mib`: bytes of the tensors autograd keeps from one forward pass for the backward
pass (activations; parameters excluded, shared storages counted once). This is the memory activation
checkpointing trades for recomputation. `peak_mib` measures a callable's peak on CUDA (allocator) or
the process's peak RSS on CPU (monotonic: meaningful only when later trials need more).
"""

from __future__ import annotations

import resource

import torch
import torch.nn.functional as F
from torch import nn


def saved_for_backward_mib(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(saved.values()) / 2**20


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def total_host_mib() -> float:
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
