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


def run(folder, kind: str, seed: int, stop_at: int | None = None):
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
                    head_classes=2, epochs=EPOCHS)
    hooks = [resume.CheckpointHooks(folder, every=1, is_main=True, every_steps=EVERY)]
    if stop_at is not None:
        hooks.append(StopAt(stop_at))
    metrics = loop.train(trainable, loaders, cfg, CPU, hooks=hooks)
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
