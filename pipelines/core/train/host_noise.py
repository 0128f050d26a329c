"""Host noise around a timed window: page faults counted, fault bursts flagged, Python's collector kept out.

On a CPU most of a step time's spread is the host's, not the model's: glibc handing freed activation buffers
back to the OS and faulting them in again, and the cyclic garbage collector collecting another arm's garbage
inside this arm's step. The loop (train/loop.py) reads `page_faults` when a timed window opens and closes,
`fault_bursts` names the interleaved blocks whose faults burst, and `collector_paused` runs the collector
before a window and keeps it off inside. `heap_frozen` keeps that collection short across a process's blocks.
"""

from __future__ import annotations

import gc
import resource
import statistics
from contextlib import contextmanager
from typing import Iterator, Sequence


def page_faults() -> tuple[int, int]:
    """(minor, major) page faults of this process so far (getrusage): glibc handing freed activation
    buffers back to the OS and faulting them in again is the main source of step-time spread on a CPU."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


FAULT_BURST = 1000  # minor faults in one block, and 10x the arm's median block, make a burst


def fault_bursts(blocks: Sequence[Sequence[float]]) -> list[int]:
    """The rounds of the blocks whose minor page faults burst: at least FAULT_BURST and 10 times the arm's
    median block. With the allocator pinned a block faults a few pages; a burst (the heap grown or trimmed,
    thousands of pages faulted in again, up to about 1 % of a 0.5 s block) is flagged, never dropped."""
    if not blocks:
        return []
    typical = statistics.median(b[3] for b in blocks)
    return [int(b[0]) for b in blocks if b[3] >= max(FAULT_BURST, 10 * typical)]


@contextmanager
def collector_paused(paused: bool = True) -> Iterator[None]:
    """Python's cyclic garbage collector off for a timed window (a collection inside it is seconds of
    another arm's garbage, billed to this step); it runs, untimed, before the window opens."""
    if not paused:
        yield
        return
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def heap_frozen() -> Iterator[None]:
    """The objects alive now (torch's modules, the arms' models, datasets: about a million) moved out of the
    collector's sight for the blocks that follow (gc.freeze), so the collection before each block scans only
    what was made since. Unfrozen it took 0.155 s a block, untimed but 13 of a 65 s process of
    harness-calibration's 84 blocks (cProfile of one worker); garbage made inside the blocks is collected as
    before. On exit everything is unfrozen and collected once."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()
