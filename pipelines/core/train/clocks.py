"""Step clocks: how the loop reads time without changing what it measures.

On a CPU every operation has finished when it returns, so a host clock read (`time.perf_counter`) after
the step is exact. On a GPU work is queued: a host clock read is only right after
`torch.cuda.synchronize()`, and synchronizing at every step serializes host and device, which removes
the very overlap that chapter 5's `pin_memory=True` + `non_blocking=True` exists to create (the next
batch's copy running while the current step computes). So on CUDA the loop records CUDA events on the
stream (no waiting) and resolves them once, when a measured window ends (`settle`): one synchronization
per window, not three per step.

A clock hands out marks (`mark()`), turns two settled marks into seconds (`seconds(a, b)`) and settles
before any of that window's marks are read. `for_device` picks the clock; `EventClock` takes its event
factory and synchronize function as arguments so its bookkeeping is testable on a CPU-only machine.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def now(device: torch.device) -> float:
    """A host clock read after the device's queued work finished: a window's wall time."""
    synchronize(device)
    return time.perf_counter()


class HostClock:
    """perf_counter after synchronizing the device (a no-op on CPU): exact where work is synchronous."""

    def __init__(self, device: torch.device):
        self.device = device

    def mark(self) -> float:
        return now(self.device)

    def settle(self) -> None:
        """Nothing to wait for: every mark was read when it was made."""

    @staticmethod
    def seconds(start: float, end: float) -> float:
        return end - start


class EventClock:
    """CUDA events recorded on the current stream; one synchronization when a window settles."""

    def __init__(self, new_event: Callable[[], Any], synchronize: Callable[[], None]):
        self.new_event, self.synchronize = new_event, synchronize
        self.settles = 0  # how many times the clock waited for the device (one per measured window)

    def mark(self) -> Any:
        event = self.new_event()
        event.record()
        return event

    def settle(self) -> None:
        self.synchronize()
        self.settles += 1

    @staticmethod
    def seconds(start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1e3  # CUDA events report milliseconds


def for_device(device: torch.device) -> HostClock | EventClock:
    if device.type == "cuda":
        return EventClock(lambda: torch.cuda.Event(enable_timing=True), lambda: torch.cuda.synchronize(device))
    return HostClock(device)
