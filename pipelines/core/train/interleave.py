"""Arms of one process measured in interleaved blocks, so their ratio sees one process, not two.

Process-to-process noise (where threads landed, memory layout, the host's load that minute) is most of the
spread of a step time on a shared VM, and more steps inside one process cannot average it away (Kalibera &
Jones). Arms that can share a process (core/harness/sharing.py) are therefore built side by side, each with its
own model, optimizer, data iterator and RNG state, and run in short blocks in turn:

1. every arm warms up (compilation, allocator growth, cache fills: timed apart, `warmup_s`), in the order
   the arms were built: the given order in even rounds, reversed in odd ones;
2. each arm's block is sized from its own warm-up steps to about `block_s` seconds, so blocks of a fast and a
   slow arm cover the same stretch of the machine's time (with fixed `--steps`, every block has the same
   steps instead);
3. cycles run every arm once, in whole periods of a carry-over balanced order (stats/orders.py: every arm
   follows every other arm once a period and never itself, the labels rotated by the process's round so
   positions balance over processes); the first step after each switch of arms is run and dropped (the
   cache and the allocator still hold the previous arm's working set);
4. Python's collector runs before each block and is paused inside it, the objects alive when the blocks
   begin frozen out of its sight (host_noise.heap_frozen); the page faults of each block are counted
   (getrusage);
5. a block in which dynamo compiled a new graph (a recompile: a last partial batch, a guard that failed) is
   marked, and the report leaves its pairs out of the steady-state ratio.

The record of each arm keeps its blocks (BLOCK_COLUMNS: cycle, steps, seconds, minor faults, major faults,
recompiled, samples, and the block's position in the process's sequence) and the period's length;
stats/intervals.py pairs the blocks of two arms by cycle and process. PyTorch's own dynamo benchmark runner
alternates eager and compiled inside one process on every repeat for the same reason.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from pipelines.core.stats import orders
from pipelines.core.train import progress
from pipelines.core.train.host_noise import heap_frozen
from pipelines.core.train.loop import Training

BLOCK_COLUMNS = ("cycle", "steps", "seconds", "minor_faults", "major_faults", "recompiled", "samples", "position")


def steps_per_block(warmup_times: Sequence[float], block_s: float | None, fixed_steps: int | None,
                    blocks: int) -> int:
    """Steps in one block: about `block_s` seconds of this arm's steady steps (the warm-up steps after the
    first, which holds compilation), or `fixed_steps` spread over the blocks."""
    if block_s is None:
        return max(1, math.ceil((fixed_steps or 1) / max(blocks, 1)))
    steady = list(warmup_times[1:]) or list(warmup_times)
    if not steady:
        return 1
    return max(1, round(block_s / max(statistics.median(steady), 1e-6)))


def _compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far (0 when dynamo was never imported)."""
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    return int(dynamo_utils.counters["stats"]["unique_graphs"]) if dynamo_utils is not None else 0


@contextmanager
def own_rng(arm: Training) -> Iterator[None]:
    """The arm's own random state while it runs (dropout, a loader's shuffle), the process's restored after:
    an arm's draws never depend on which arm ran before it."""
    outer = torch.random.get_rng_state()
    outer_cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    outer_host = (random.getstate(), np.random.get_state())
    torch.random.set_rng_state(arm.rng)
    if arm.cuda_rng is not None and outer_cuda is not None:
        torch.cuda.set_rng_state_all(arm.cuda_rng)
    random.setstate(arm.host_rng[0])
    np.random.set_state(arm.host_rng[1])
    try:
        yield
    finally:
        arm.rng = torch.random.get_rng_state()
        arm.cuda_rng = torch.cuda.get_rng_state_all() if outer_cuda is not None else None
        arm.host_rng = (random.getstate(), np.random.get_state())
        torch.random.set_rng_state(outer)
        if outer_cuda is not None:
            torch.cuda.set_rng_state_all(outer_cuda)
        random.setstate(outer_host[0])
        np.random.set_state(outer_host[1])


def measure_blocks(arms: Sequence[Training], blocks: int, block_s: float | None, fixed_steps: int | None,
                   agree: Callable[[int], int] = lambda steps: steps, rotation: int = 0) -> None:
    """Warm every arm's training up, size its blocks, then run `blocks` cycles (rounded up to whole periods,
    stats/orders.py) of one block per arm, in the period's order with its labels rotated by `rotation` (the
    process's round). A lone arm runs its blocks back to back with nothing dropped (there is no switch).
    `agree`: the block size every rank of a launch runs (rank 0's), so their collectives stay in step."""
    blocks = orders.cycles(blocks, block_s, fixed_steps, len(arms))
    for arm in orders.abba(arms, rotation):  # the order they were built in (harness/execute.py)
        with own_rng(arm):
            arm.warm_up()
        arm.block_steps = agree(steps_per_block(arm.warmup_times, block_s, fixed_steps, blocks))
        arm.cycles_per_period = orders.cycles_per_period(len(arms))
    discard = 1 if len(arms) > 1 else 0
    position = 0
    with heap_frozen():
        for index in range(blocks):
            for arm in orders.cycle_order(arms, index, rotation):
                with own_rng(arm):
                    graphs = _compiled_graphs()
                    arm.block(arm.block_steps, index, discard)
                    arm.blocks[-1][5] = int(_compiled_graphs() != graphs)
                    arm.blocks[-1].append(position)
                position += 1
                progress.note_block(str(arm.cfg.arm), position, blocks * len(arms))
