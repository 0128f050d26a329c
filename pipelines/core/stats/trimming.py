"""A process's block pairs reduced to one log ratio: a trimmed mean that keeps the order balanced.

Why trim: the host taking a core for 100-200 ms lands on single blocks (on a 2-core VM one moved a process's
mean block ratio by 4 %: 0.73 beside eleven pairs at 1.00-1.03); such blocks slow either arm as often, so
trimming both ends does not bias the ratio, and keeps about 94 % of the mean's efficiency for normal noise.
Why balanced: the pairs of one place in the period (stats/orders.py) share their predecessors, so dropping
pairs by value could take more of one place than of another; each place is weighted alike after the cut.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

TRIM = 0.2  # of each end of a process's block pairs (none with fewer than 5)

class Cycles(NamedTuple):
    """One process's block pairs: each cycle's log ratio, and the cycle's place in its period (cycle index
    modulo the period's length, stats/orders.py), so that trimming cannot unbalance the order."""

    logs: Sequence[float]
    places: Sequence[int]


def balanced_trimmed_mean(rows: np.ndarray, places: np.ndarray, trim: float = TRIM) -> np.ndarray:
    """Each row's mean after dropping `trim` of its values at each end (by value; none with fewer than 5
    values), with every place of the period weighted alike: the mean over places of the mean of each
    place's kept values. Pairs of one place share their predecessors (stats/orders.py); weighting places
    alike keeps the carry-over balanced whichever pairs were dropped. With one place (two arms, or records
    of the ABBA order) it is the plain trimmed mean."""
    count = rows.shape[1]
    cut = int(trim * count) if count >= 5 else 0
    ranks = np.argsort(np.argsort(rows, axis=1, kind="stable"), axis=1)
    kept = (ranks >= cut) & (ranks < count - cut)
    sums, counts = [], []
    for place in np.unique(places):
        mine = kept & (places == place)
        sums.append(np.where(mine, rows, 0.0).sum(axis=1))
        counts.append(mine.sum(axis=1))
    sums_a, counts_a = np.vstack(sums), np.vstack(counts)
    present = counts_a > 0
    means = np.where(present, sums_a / np.maximum(counts_a, 1), 0.0)
    return means.sum(axis=0) / present.sum(axis=0)
