"""Memory measurements that mean the same for every variant of a run (the loop's peak RSS does not:
variants run in one process, so ru_maxrss of a later variant includes an earlier variant's peak).

`saved_for_backward_mib`: bytes of the tensors autograd keeps from one forward pass for the backward
pass (activations; parameters excluded, shared storages counted once). This is the memory activation
checkpointing trades for recomputation. `reset_peak` + `peak_mib`: the peak between the two calls, from
the CUDA allocator, or on CPU the process's resident-set high-water mark (Linux VmHWM, reset through
/proc/self/clear_refs; where that is unavailable, the process's lifetime peak, ru_maxrss).
"""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


def saved_for_backward_mib(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                           dtype: torch.dtype | None = None) -> float:
    """`dtype`: the forward under autocast to it, as the arm trains (its low-precision activations, and the
    weights' low-precision copies autograd keeps for backward, are what that arm holds)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), \
            torch.autocast(x.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(saved.values()) / 2**20


PROC = Path("/proc/self")


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        (PROC / "clear_refs").write_text("5")  # "5" resets this process's peak RSS (VmHWM) to its RSS
    except OSError:
        pass  # no /proc (not Linux) or not writable: peak_mib falls back to the lifetime peak


def peak_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        found = re.search(r"^VmHWM:\s+(\d+) kB", (PROC / "status").read_text(), re.M)
    except OSError:
        found = None
    return int(found.group(1)) / 1024 if found else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_reserved_mib(device: torch.device) -> float | None:
    """CUDA only: the caching allocator's reserved peak, what the talk printed (max_memory_reserved / 1e9 as
    "GB"); the allocated peak (peak_mib) is what tensors held. None on a CPU, which has no such pool."""
    return torch.cuda.max_memory_reserved(device) / 2**20 if device.type == "cuda" else None


def process_peaks(device: torch.device) -> dict[str, float]:
    """Peak resident memory of this process so far, and the GPU allocator's peak when on CUDA."""
    out = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.type == "cuda":
        out["peak_gpu_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def total_host_mib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
