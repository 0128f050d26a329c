"""The order arms take turns in (core/stats/orders.py): a period in which every arm follows every other arm
once and never itself, cycle boundaries and the wrap to the next period included; labels rotated per process
so positions balance; whole periods; and the report's trimming that drops whole periods."""

from __future__ import annotations

import math
import time
from collections import Counter

import numpy as np
import pytest

from pipelines.core.stats import orders, record_pairing, trimming


def adjacent(rows) -> list[tuple[int, int]]:
    sequence = [arm for row in rows for arm in row]
    return [(sequence[i], sequence[(i + 1) % len(sequence)]) for i in range(len(sequence))]


@pytest.mark.parametrize("arms", range(2, orders.MAX_BALANCED + 1))
def test_every_arm_follows_every_other_once_a_period_and_never_itself(arms):
    began = time.perf_counter()
    rows = orders.period(arms)
    assert time.perf_counter() - began < 5  # found by a search: it must stay instant at the sizes it serves
    assert len(rows) == max(1, arms - 1) and all(sorted(row) == list(range(arms)) for row in rows)
    steps = adjacent(rows)
    assert all(a != b for a, b in steps)
    assert Counter(steps) == Counter((a, b) for a in range(arms) for b in range(arms) if a != b)


def test_beyond_the_balanced_sizes_no_arm_follows_itself():
    rows = orders.period(orders.MAX_BALANCED + 1)
    assert len(rows) == 1 and all(a != b for a, b in adjacent(rows))


@pytest.mark.parametrize("arms", [2, 3, 4, 6])
def test_over_n_processes_every_arm_takes_every_position_of_every_cycle_once(arms):
    items = [f"arm{i}" for i in range(arms)]
    for cycle in range(orders.cycles_per_period(arms)):
        positions = Counter((pos, arm) for p in range(arms)
                            for pos, arm in enumerate(orders.cycle_order(items, cycle, rotation=p)))
        assert set(positions.values()) == {1} and len(positions) == arms * arms


def test_cycles_are_whole_periods():
    assert orders.cycles(12, 0.5, None, arms=4) == 12  # period 3
    assert orders.cycles(12, 0.5, None, arms=6) == 15  # period 5: rounded up
    assert orders.cycles(12, 0.5, None, arms=1) == 12
    assert orders.cycles(12, None, 3, arms=2) == 3  # --steps 3: 3 blocks of 1 step, not 12 blocks
    assert orders.cycles(12, None, 3, arms=3) == 3  # 2 whole periods would need 4 steps: 3 blocks of 1
    assert orders.cycles(7, None, 30, arms=3) == 8  # whole periods of 2, within the 30 steps
    assert orders.cycles(12, None, 30, arms=2) == 12


def test_pairs_carry_their_place_in_the_period_and_trimming_weighs_places_alike():
    """A process of 3 arms (periods of 2 cycles): each pair keeps its place; after the cut by value every
    place weighs the same, so pairs dropped from one place cannot tilt the mean towards the other. A
    record without `cycles_per_period` (the ABBA order) has one place: the plain trimmed mean."""
    def record(arm: str, seconds: list[float], per_period: int | None) -> dict:
        metrics = {"blocks": [[i, 1, s, 0, 0, 0, 1.0] for i, s in enumerate(seconds)]}
        if per_period:
            metrics["cycles_per_period"] = per_period
        return {"experiment": "x", "variant": arm, "pairing": {"process": "p0", "comparison": "c", "round": 0},
                "metrics": metrics}
    mine, base = [1.0, 2.0] * 5, [1.0] * 10
    paired = record_pairing.paired_units([record("a", mine, 2)], [record("b", base, 2)])
    assert paired.kind == "process" and list(paired.units[0].places) == [0, 1] * 5
    assert "10 block pairs" in paired.text()
    logs = np.log([1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25])[None, :]
    places = np.array([[0] * 5 + [1] * 5])
    # the cut (2 a side) drops two 1.0s of place 0 and the 0.25 and one 0.5 of place 1: plain mean of
    # what is left is tilted to place 0 (4 of 6 kept values), the balanced one weighs both places alike
    assert float(trimming.balanced_trimmed_mean(logs, places)[0]) == pytest.approx((math.log(1.0) + math.log(0.5)) / 2)
    assert float(trimming.balanced_trimmed_mean(logs, np.zeros_like(places))[0]) == pytest.approx(
        float(np.mean(np.sort(logs[0])[2:8])))
    old = record_pairing.paired_units([record("a", mine, None)], [record("b", base, None)])
    assert set(old.units[0].places) == {0}


def test_an_arm_alone_pairs_with_its_baseline_s_solo_process_of_the_round():
    """Round pairing: the baseline ran twice in round 0 (among the ladder's arms, and alone for the lone
    arm); the lone arm's ratio divides by the solo record, measured as it was."""
    def record(variant: str, process: str, arms: list[str], seconds: float) -> dict:
        return {"experiment": "x", "variant": variant, "status": "ok", "config": {"batch_size": 1},
                "pairing": {"comparison": "c", "round": 0, "process": process, "arms": arms},
                "metrics": {"samples_per_step": 1, "step_times_s": [seconds] * 4,
                            "throughput_samples_per_s": 1 / seconds}}
    among = record("baseline", "c:0:0", ["x [baseline]", "x [nobias]"], 2.0)
    solo = record("baseline", "c:0:2", ["x [baseline]"], 1.0)
    lone = record("iomp", "c:0:1", ["x [iomp]"], 1.0)
    for order in ([among, solo], [solo, among]):
        paired = record_pairing.paired_units([lone], order)
        assert paired.kind == "round" and len(paired.units) == 1
        variant, baseline = paired.units[0]
        assert variant.throughput == baseline.throughput  # the solo record's 1.0 s steps, not the other's 2.0
