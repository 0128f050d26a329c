"""Arms of one process in interleaved blocks (core/train/interleave.py) on the loop's own Training: each
arm keeps its own steps, clocks, data and random state, blocks run in the period's order (stats/orders.py,
rotated by the process's round), the first step after a
switch is dropped, the collector is paused inside a block, and `train_s` is the arm's own windows only."""

from __future__ import annotations

import gc
import time

import pytest
import torch

from pipelines.core.data import datasets
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train import host_noise, interleave, loop


def training(name: str, log: list, seconds: float, batch: int = 4, warmup: int = 2,
             train_samples: int | None = None) -> loop.Training:
    cfg = RunConfig(experiment="x", pipeline="p", variant=name, model="cnn_fmnist", dataset="synthetic",
                    batch_size=batch, steps=6, warmup_steps=warmup, blocks=4, block_s=None)
    loaders = datasets.loaders(cfg, (1, 28, 28))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))

    def step(x, y):
        log.append((name, gc.isenabled(), float(torch.rand(()))))
        time.sleep(seconds)
        return torch.tensor(1.0)

    return loop.Training(loop.Trainable(model, step, count_flops=False), loaders, cfg,
                         loop.RunContext(torch.device("cpu")))


@pytest.mark.parametrize("rotation, first", [(0, "a"), (1, "b")])
def test_two_arms_alternate_never_twice_in_a_row_with_a_dropped_step_after_each_switch(rotation, first):
    """Two arms: ABAB (a block never follows its own arm's), the first arm the process's round's; the warm-ups
    in the order the arms were built, reversed in odd rounds."""
    log: list = []
    arms = [training("a", log, 0.002), training("b", log, 0.002)]
    interleave.measure_blocks(arms, blocks=4, block_s=None, fixed_steps=6, rotation=rotation)
    assert [arm.block_steps for arm in arms] == [2, 2]  # 6 steps over 4 blocks, rounded up
    warmed = [name for name, _, _ in log[:4]]  # in the order the arms were built: reversed in odd rounds
    assert warmed == (["a", "a", "b", "b"] if rotation % 2 == 0 else ["b", "b", "a", "a"])
    order = [name for name, _, _ in log[4:]]  # after both warm-ups (2 steps each)
    second = "b" if first == "a" else "a"
    assert order == ([first] * 3 + [second] * 3) * 4
    for arm in arms:
        metrics = arm.finish(shared=True)
        assert metrics["measured_steps"] == 8 and metrics["discarded_steps"] == 4 and metrics["warmup_steps"] == 2
        assert [b[0] for b in metrics["blocks"]] == [0, 1, 2, 3] and all(b[6] == 8 for b in metrics["blocks"])
        mine = 0 if arm is arms[["a", "b"].index(first)] else 1
        assert [b[7] for b in metrics["blocks"]] == [mine, mine + 2, mine + 4, mine + 6]  # positions in the run
        assert metrics["cycles_per_period"] == 1
        assert metrics["epoch_times_s"] == [] and "peak_rss_mib" not in metrics  # not this arm's alone
        assert metrics["block_steps"] == 2 and metrics["recompiled_blocks"] == []  # eager: nothing compiled


def test_the_collector_is_paused_only_inside_timed_steps():
    log: list = []
    arms = [training("a", log, 0.0), training("b", log, 0.0)]
    interleave.measure_blocks(arms, blocks=2, block_s=None, fixed_steps=2)
    timed = [enabled for i, (_, enabled, _) in enumerate(log) if i >= 4 and (i - 4) % 2 == 1]
    assert gc.isenabled() and not any(timed) and log[0][1]  # warm-up ran with it, timed steps without


def test_the_blocks_run_with_the_heap_frozen_and_the_garbage_they_make_is_still_collected():
    """The collection before a block scans only what was made since the blocks began (gc.freeze); cyclic
    garbage made inside a block is collected before the next, and nothing stays frozen afterwards."""
    frozen, collected = [], []

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            collected.append(1)

    def step(x, y):
        frozen.append(gc.get_freeze_count())
        Cycle()  # unreachable at once: only the collector can free it
        return torch.tensor(1.0)

    arms = [training("a", [], 0.0), training("b", [], 0.0)]
    for arm in arms:
        arm.trainable = loop.Trainable(arm.trainable.model, step, count_flops=False)
    interleave.measure_blocks(arms, blocks=2, block_s=None, fixed_steps=2)
    assert len(frozen) > 4 and all(count > 0 for count in frozen[4:])  # the steps after the warm-ups: frozen
    assert gc.get_freeze_count() == 0 and len(collected) == len(frozen)  # unfrozen; every cycle freed


def test_train_s_counts_an_arm_s_own_blocks_not_the_other_arm_s():
    log: list = []
    slow, fast = training("slow", log, 0.02), training("fast", log, 0.0)
    began = time.perf_counter()
    interleave.measure_blocks([slow, fast], blocks=4, block_s=None, fixed_steps=8)
    whole = time.perf_counter() - began
    assert 8 * 0.02 <= slow.train_s < whole  # its 8 timed steps of at least 20 ms, not the whole run
    assert fast.train_s < slow.train_s / 2  # the slow arm's blocks between its own never count


def test_each_arm_keeps_its_own_random_state():
    """An arm's draws do not depend on which arm ran before it: alone or beside another, the same numbers."""
    torch.manual_seed(0)
    log_alone: list = []
    alone = training("a", log_alone, 0.0)  # its random state: the process's when it was built
    interleave.measure_blocks([alone], blocks=3, block_s=None, fixed_steps=3)
    torch.manual_seed(0)
    log_pair: list = []
    a = training("a", log_pair, 0.0)
    b = training("b", log_pair, 0.0)
    interleave.measure_blocks([a, b], blocks=3, block_s=None, fixed_steps=3)
    draws = lambda log: [v for name, _, v in log if name == "a"]  # noqa: E731
    assert draws(log_pair)[:len(draws(log_alone))][:2] == draws(log_alone)[:2]  # warm-up draws agree


def test_blocks_are_sized_from_the_warm_up_to_the_time_asked():
    assert interleave.steps_per_block([9.0, 0.1, 0.1, 0.1], block_s=0.5, fixed_steps=None, blocks=12) == 5
    assert interleave.steps_per_block([9.0, 2.0], block_s=0.5, fixed_steps=None, blocks=12) == 1
    assert interleave.steps_per_block([], block_s=None, fixed_steps=20, blocks=12) == 2


def test_three_arms_run_whole_periods_each_arm_after_every_other_once_a_period():
    log: list = []
    arms = [training(name, log, 0.0) for name in "abc"]
    interleave.measure_blocks(arms, blocks=3, block_s=None, fixed_steps=8)  # 3 cycles -> 2 whole periods of 2
    runs = [name for name, _, _ in log[6:]][::3]  # after the warm-ups; a dropped and 2 timed steps a block
    assert len(runs) == 12 and all(x != y for x, y in zip(runs, runs[1:]))
    assert sorted(zip(runs[:6], runs[1:7])) == sorted((x, y) for x in "abc" for y in "abc" if x != y)
    assert all(arm.cycles_per_period == 2 for arm in arms)


def test_a_last_partial_batch_counts_what_it_holds():
    """10 samples at batch 4: steps of 4, 4, 2 per epoch; throughput counts 10 samples, not 12."""
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                    batch_size=4, steps=3, warmup_steps=0)
    data = torch.utils.data.TensorDataset(torch.zeros(10, 1, 28, 28), torch.zeros(10, dtype=torch.long))
    loaders = datasets.Loaders(torch.utils.data.DataLoader(data, batch_size=4), None, "synthetic", 10, 0, {})
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))
    metrics = loop.train(loop.Trainable(model, lambda x, y: torch.tensor(0.0), count_flops=False), loaders, cfg,
                         loop.RunContext(torch.device("cpu")))
    assert metrics["samples_per_step"] == pytest.approx(10 / 3)
    assert metrics["throughput_samples_per_s"] == pytest.approx(10 / metrics["train_s"])


def test_an_arm_s_draws_never_depend_on_the_arm_before_it():
    """Between interleaved blocks each arm runs on its own random state: torch's, and Python's and NumPy's
    global generators (a transform or a sampler may draw from them), taken when it was built."""
    import random
    from types import SimpleNamespace

    import numpy as np

    from pipelines.core.train import interleave

    def arm(seed: int) -> SimpleNamespace:
        torch.manual_seed(seed), random.seed(seed), np.random.seed(seed)
        return SimpleNamespace(rng=torch.random.get_rng_state(), cuda_rng=None,
                               host_rng=(random.getstate(), np.random.get_state()))

    def draws(training) -> tuple:
        with interleave.own_rng(training):
            return float(torch.rand(1)), random.random(), float(np.random.rand())

    a, b = arm(1), arm(2)
    alone = [draws(a) for _ in range(2)]
    a, b = arm(1), arm(2)
    first = draws(a)
    draws(b)  # another arm between a's blocks
    outer = (random.getstate(), np.random.get_state()[1].copy())
    assert [first, draws(a)] == alone
    assert random.getstate() == outer[0] and (np.random.get_state()[1] == outer[1]).all()  # the process's, back


def test_a_page_fault_burst_is_flagged_in_the_record_and_named_in_the_report():
    """With the allocator pinned a block faults a few pages; one that faults thousands (the heap trimmed and
    grown again) is flagged by its round, kept in the ratio, and named beside the verdict."""
    import copy

    from pipelines.core.stats import rows as stats_rows
    from pipelines.core.record.results import Loaded
    from recordutil import GOLDEN

    blocks = [[k, 10, 0.5, 3 + k % 2, 0, 0, 640] for k in range(12)]
    blocks[7][3] = 3136  # one ch2-bs256 block of the Zen 4 reference
    assert host_noise.fault_bursts(blocks) == [7]
    assert host_noise.fault_bursts([[0, 10, 0.5, 900, 0, 0, 640], [1, 10, 0.5, 0, 0, 0, 640]]) == []  # under 1,000
    rec = copy.deepcopy(GOLDEN)
    rec["metrics"]["fault_burst_blocks"] = [7]
    row = next(r for r in stats_rows.build(Loaded([rec], [], 1)) if r.records)
    assert "1 timed block(s) with a page-fault burst" in row.why


@pytest.mark.parametrize("repeat, built_in", [(0, "abc"), (1, "cba"), (2, "abc")])
def test_a_unit_s_arms_are_built_in_its_order_in_even_repeats_and_reversed_in_odd_ones(monkeypatch, repeat,
                                                                                       built_in):
    """Whatever building first leaves behind (where the tensors landed, which arm filled a cache) favours no
    arm over the processes; the built arms come back in the unit's order, which the period's labels follow."""
    from types import SimpleNamespace

    from pipelines.core.harness import execute

    made: list[str] = []

    def build(the_plan, cfg, ctx, at_repeat, counter, run_id=""):
        made.append(cfg.arm)
        return SimpleNamespace(cfg=cfg, repeat=at_repeat)

    monkeypatch.setattr(execute, "build", build)
    unit = [(None, SimpleNamespace(arm=name)) for name in "abc"]
    built: list = []
    execute.build_unit(unit, None, repeat, {name: None for name in "abc"}, built)
    assert "".join(made) == built_in
    assert [b.cfg.arm for b in built] == ["a", "b", "c"] and all(b.repeat == repeat for b in built)
