"""A run stopped inside an epoch resumes from its last step checkpoint and ends with the weights of a run
that was never stopped (core/train/checkpoint.py, data/sampling.py, train/batches.py).

The resumed "process" is simulated in this one: everything a new process would build afresh (the model's
initial weights, the optimizer, the loader and its sampler, every random state) is built again under another
seed, so anything the checkpoint fails to carry shows up as a difference. The model has dropout, so the
random state must be restored to the step, and the run goes one epoch past the resumed one, so the next
epoch's order must be the one the sampler would have drawn.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, SubsetRandomSampler, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.data import datasets
from pipelines.core.data.sampling import ResumableSampler
from pipelines.core.errors import ConfigError
from pipelines.core.train import checkpoint, loop, resume, steps

CPU = loop.RunContext(torch.device("cpu"))
SAMPLES, BATCH, EVERY = 40, 4, 3  # 10 batches an epoch, a step checkpoint after batches 3, 6 and 9
EPOCHS = 3


class Stopped(Exception):
    """The host lost: raised after a given step, before that step's checkpoint could be taken."""


class StopAt(loop.Hooks):
    def __init__(self, step: int):
        self.step = step

    def step_end(self, done: int) -> None:
        if done == self.step:
            raise Stopped


def sampler_of(kind: str, data: TensorDataset) -> ResumableSampler:
    if kind == "shuffle":  # torch's RandomSampler: its order drawn from the global generator
        return ResumableSampler(RandomSampler(data))
    if kind == "subset":  # its own generator, as the book's split
        return ResumableSampler(SubsetRandomSampler(range(SAMPLES), generator=torch.Generator().manual_seed(7)))
    return ResumableSampler(DistributedSampler(range(SAMPLES), num_replicas=1, rank=0, shuffle=True, seed=3))


def run(folder, kind: str, seed: int, stop_at: int | None = None, steps_budget: int | None = None):
    """One run of EPOCHS epochs with step checkpoints; returns the trainable and the record's metrics."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(11)  # the data: the same in every process
    data = TensorDataset(torch.randn(SAMPLES, 4, generator=generator), torch.randint(0, 2, (SAMPLES,),
                                                                                     generator=generator))
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainable = loop.Trainable(model, steps.plain_step(model, optimizer), optimizer=optimizer, count_flops=False)
    train = DataLoader(data, batch_size=BATCH, sampler=sampler_of(kind, data))
    loaders = datasets.Loaders(train, train, "synthetic", SAMPLES, SAMPLES, {})
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="m", dataset="synthetic", batch_size=BATCH,
                    head_classes=2, epochs=EPOCHS, steps=steps_budget)
    hooks = [resume.CheckpointHooks(folder, every=1, is_main=True, every_steps=EVERY)]
    if stop_at is not None:
        hooks.append(StopAt(stop_at))
    try:
        metrics = loop.train(trainable, loaders, cfg, CPU, hooks=hooks)
    except Stopped as stop:
        stop.hooks = hooks[0]  # as the runner's failure path finds them (harness/execute.py)
        raise
    metrics.update(trainable.metrics)
    return trainable, metrics


@pytest.mark.parametrize("kind", ["shuffle", "subset", "distributed"])
def test_a_run_stopped_inside_an_epoch_resumes_there_and_ends_with_the_uninterrupted_weights(kind, tmp_path, capsys):
    whole, _ = run(tmp_path / "whole", kind, seed=0)
    with pytest.raises(Stopped):  # epoch 1's 4th batch: saved after its 3rd, so one step is lost
        run(tmp_path / "cut", kind, seed=0, stop_at=10 + 4)
    state = checkpoint.load(tmp_path / "cut" / checkpoint.FILENAME)
    assert (state["epoch"], state["batch"]) == (1, 3)
    resumed, metrics = run(tmp_path / "cut", kind, seed=12345)
    assert (metrics["start_epoch"], metrics["start_batch"]) == (1, 3)
    assert metrics["resumed_from"]["batch"] == 3 and metrics["resumed_from"]["lost_at_most"] == f"{EVERY} batches"
    assert "lost_steps" not in metrics["resumed_from"]  # no process of the stopped run said where it got to
    assert metrics["warmup_steps"] + metrics["measured_steps"] == (10 - 3) + 10  # the rest of epoch 1, epoch 2
    assert "at epoch 1, batch 3 (attempt 0;" in capsys.readouterr().err
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
    momentum = [s["momentum_buffer"] for s in resumed.optimizer.state_dict()["state"].values()]
    assert all(torch.equal(a, b) for a, b in zip(
        [s["momentum_buffer"] for s in whole.optimizer.state_dict()["state"].values()], momentum))


def test_the_step_saves_are_untimed_and_the_epoch_end_save_still_comes(tmp_path):
    _, metrics = run(tmp_path, "shuffle", seed=0)
    assert metrics["checkpoint_save_s"] > 0
    assert metrics["train_s"] == pytest.approx(sum(metrics["epoch_times_s"]), abs=0.05)
    assert checkpoint.load(tmp_path / checkpoint.FILENAME)["complete"]
    before = checkpoint.load(tmp_path / checkpoint.PREVIOUS)  # the last epoch's end, after its step saves
    assert (before["epoch"], before["batch"], before["complete"]) == (EPOCHS, 0, False)


def test_a_checkpoint_inside_an_epoch_is_refused_by_a_loader_that_cannot_start_there(tmp_path):
    with pytest.raises(Stopped):
        run(tmp_path, "shuffle", seed=0, stop_at=5)  # a step save after batch 3 of epoch 0
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.ReLU(), nn.Linear(8, 2))
    trainable = loop.Trainable(model, lambda x, y: torch.tensor(0.0))
    plain = datasets.Loaders(DataLoader(TensorDataset(torch.zeros(8, 4), torch.zeros(8)), batch_size=BATCH,
                                        shuffle=True), None, "synthetic", 8, 0, {})
    with pytest.raises(ConfigError, match="taken inside epoch 0 .after batch 3., and this run's training loader "
                                          "cannot start inside an epoch"):
        resume.CheckpointHooks(tmp_path, 1, True).train_start(trainable, plain)


def shards(world: int, sequence=None, consumed: int = 0) -> list[ResumableSampler]:
    """One epoch's samplers of every rank of `world` (DistributedSampler, epoch 1), optionally resumed."""
    out = []
    for rank in range(world):
        sampler = ResumableSampler(DistributedSampler(range(SAMPLES), num_replicas=world, rank=rank, seed=3))
        sampler.set_epoch(1)
        if sequence is not None:
            sampler.resume(sequence, consumed, BATCH)
        out.append(sampler)
    return out


def test_an_epoch_s_sequence_is_what_the_ranks_train_together_batch_by_batch():
    ranks = shards(3)  # 40 samples over 3 ranks: padded to 42, 14 a rank
    orders = [list(sampler) for sampler in ranks]
    sequence = ranks[0].sequence()
    assert [sequence[rank::3] for rank in range(3)] == orders  # rank r trains every third sample from r
    for j in range(3):  # so batch j of every rank is the j-th block of 3 x BATCH samples
        block = sequence[j * 3 * BATCH:(j + 1) * 3 * BATCH]
        assert set(block) == {i for order in orders for i in order[j * BATCH:(j + 1) * BATCH]}
    assert ranks[0].consumed(2, BATCH) == 2 * BATCH * 3


@pytest.mark.parametrize("after", [2, 1, 3, 7])
def test_a_checkpoint_of_two_ranks_resumed_at_any_world_size_trains_the_rest_of_the_epoch_once(after):
    """Two ranks trained 2 batches each (16 of 40 samples); the rest, shared out over `after` ranks: every
    sample of the epoch is trained once, except the padding that gives every rank as many batches."""
    before = shards(2)
    trained = [i for sampler in before for i in list(sampler)[:2 * BATCH]]
    sequence, consumed = before[0].sequence(), before[0].consumed(2, BATCH)
    again = shards(after, sequence, consumed)
    orders = [list(sampler) for sampler in again]  # the resumed epoch's (an iteration after it is a new epoch)
    rest = [i for order in orders for i in order]
    assert sorted(set(trained + rest)) == list(range(SAMPLES)) and not set(trained) & set(rest)
    assert len(rest) == (SAMPLES - consumed) + (-(SAMPLES - consumed) % after)  # the padding only
    assert len({len(order) for order in orders}) == 1  # as many samples on every rank
    if after == 2:  # the same world size: each rank goes on exactly where it was
        assert orders == [list(s)[2 * BATCH:] for s in shards(2)]
    assert again[0].resume(sequence, consumed, BATCH) == consumed // (BATCH * after)  # the batch index it goes on at


def test_a_process_that_outlives_the_failure_leaves_its_position_and_the_resume_counts_what_was_lost(tmp_path,
                                                                                                      capsys):
    with pytest.raises(Stopped) as stop:
        run(tmp_path, "shuffle", seed=0, stop_at=10 + 5)  # saved after batch 3 of epoch 1, stopped after batch 5
    stop.value.hooks.leave_position()  # what the runner's failure path does before the one line
    _, metrics = run(tmp_path, "shuffle", seed=1)
    resumed = metrics["resumed_from"]
    assert (resumed["lost_steps"], resumed["lost_samples"]) == (2, 2 * BATCH)
    assert 0 <= resumed["lost_s"] <= resumed["since_save_s"] and resumed["restart_s"] >= 0
    assert "lost 2 batches (8 samples) trained after the save, " in capsys.readouterr().err
    assert not (tmp_path / checkpoint.POSITION).exists()  # read once


def test_a_step_budget_counts_the_steps_trained_before_the_resume():
    """A run of warm-up + 22 steps stopped after step 14 (saved after 13): the resumed run trains the 9 left."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        with pytest.raises(Stopped):
            run(folder, "shuffle", seed=0, stop_at=14, steps_budget=22)
        _, metrics = run(folder, "shuffle", seed=0, steps_budget=22)
    warmup = RunConfig(experiment="x", pipeline="p", variant="v", model="m", dataset="synthetic").warmup_steps
    assert metrics["warmup_steps"] + metrics["measured_steps"] == warmup + 22 - 13
