"""The order in which arms take turns: inside a process, a carry-over balanced sequence of cycles; across
processes, ABBA.

Inside a process a block is not independent of the block before it: the caches, the allocator and the
branch predictors still hold that arm's working set. Measured on the records of
results/reference/cpu-2core-amd-f26m2-bench (ci/order-effects.py), a block that followed a block of its
own arm ran 0.8 % faster (± 0.3), though the first step after every switch is dropped. ABBA cycles (the
order reversed every other cycle) put the first and the last arm twice in a row at every other cycle
boundary and the middle arms never, which moved the middle arms' ratios by 0.3-0.45 % (docs/timing.md,
"Order effects, measured").

So the cycles of a process follow a *period*: n - 1 cycles of its n arms (each cycle every arm once) such
that, read as one sequence that repeats, every arm follows every other arm exactly once a period and never
itself, the boundaries between cycles and between periods included (`period`). The process's cycles run
whole periods (`cycles`), and the report averages a process's pairs over each period before it trims
(stats/record_pairing.py), so trimming drops whole periods and cannot unbalance the carry-over. Process p
runs the period with the arms' labels rotated by p, so over n processes every arm takes every position of
every cycle once (a drift within a cycle then costs every arm the same).

Across processes (the slots of a round, harness/rounds.py; book-scale repeats in turn) the order is ABBA
(`abba`): one process leaves no working set to the next, while the machine's drift over minutes is real,
and reversing every other round cancels a linear drift. The same reversal orders the building and warm-up
of a process's arms (harness/execute.py), so no arm is the first built in every process.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Sequence


def abba(items: Sequence[Any], round_index: int) -> list[Any]:
    """The given order in even rounds, reversed in odd ones."""
    return list(items) if round_index % 2 == 0 else list(reversed(items))


MAX_BALANCED = 16  # arms in one process up to which the period is carry-over balanced (`period`)


@lru_cache(maxsize=None)
def period(arms: int) -> tuple[tuple[int, ...], ...]:
    """The period for `arms` arms: max(1, arms - 1) cycles, each a permutation of range(arms), in which every
    ordered pair (a, b), a != b, is adjacent exactly once when the period is read as a repeating sequence.
    The first cycle is 0..n-1 (any period can be relabelled to start so); the rest are found depth first,
    least unused successor first: within 20 ms up to `MAX_BALANCED` arms (tests check every size), while the
    search grows steeply beyond (0.7 s at 19, 8 s at 22). A process of more arms repeats the cycle 0..n-1:
    no arm follows itself, but each always follows the same other arm."""
    if arms < 1:
        raise ValueError(f"a period needs at least one arm, got {arms}")
    if arms <= 2 or arms > MAX_BALANCED:
        return (tuple(range(arms)),)
    first = tuple(range(arms))
    used = set(zip(first, first[1:]))
    rows = [first]

    def next_rows() -> bool:
        if len(rows) == arms - 1:
            return (rows[-1][-1], rows[0][0]) not in used  # the wrap to the next period's first block
        for row in _cycles_after(rows[-1][-1], used, arms):
            steps = set(zip((rows[-1][-1],) + row, row))
            used.update(steps)
            rows.append(row)
            if next_rows():
                return True
            rows.pop()
            used.difference_update(steps)
        return False

    if not next_rows():  # not reached up to MAX_BALANCED arms (tests)
        raise RuntimeError(f"no carry-over balanced period found for {arms} arms")
    return tuple(rows)


def _cycles_after(previous: int, used: set[tuple[int, int]], arms: int):
    """Every permutation of range(arms) that can follow `previous` using only unused adjacent pairs."""
    row: list[int] = []
    taken: set[tuple[int, int]] = set()

    def extend(last: int):
        if len(row) == arms:
            yield tuple(row)
            return
        for arm in range(arms):
            step = (last, arm)
            if arm == last or arm in row or step in used or step in taken:
                continue
            row.append(arm)
            taken.add(step)
            yield from extend(arm)
            taken.discard(step)
            row.pop()

    yield from extend(previous)


def cycle_order(items: Sequence[Any], cycle: int, rotation: int = 0) -> list[Any]:
    """The items of one cycle in the order the period gives its index, the labels rotated by `rotation` (the
    process's round, so positions balance over processes)."""
    count = len(items)
    if count < 2:
        return list(items)
    rows = period(count)
    return [items[(label + rotation) % count] for label in rows[cycle % len(rows)]]


def cycles_per_period(arms: int) -> int:
    return len(period(arms)) if arms else 1


def cycles(blocks: int, block_s: float | None, fixed_steps: int | None, arms: int) -> int:
    """How many cycles (blocks per arm) a process runs: `blocks` rounded up to whole periods, or with
    `--steps N` no more than N (each block holds at least one timed step, so `--steps 3` is 3 blocks of 1
    step), then whole periods where that stays within N."""
    per = cycles_per_period(arms)
    if block_s is None and fixed_steps:
        wanted = min(blocks, fixed_steps)
        whole = math.ceil(wanted / per) * per
        return whole if whole <= fixed_steps else wanted
    return math.ceil(blocks / per) * per
