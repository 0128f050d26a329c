"""What the sources' loops did besides the step, inside their clocks (core/train/bookkeeping.py): the per-epoch
validation pass is inside the timed region (the test pass is not), and the talk's per-batch train accuracy and
loss lines are what its loop computed."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from pipelines.core.data import datasets
from pipelines.core.harness import recording
from pipelines.core.config import experiments, options
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train import bookkeeping, evaluation, loop, steps

CPU = loop.RunContext(torch.device("cpu"))
PAUSE_S = 0.05  # each validation batch waits this long, so its time is plain to see


def config(**extra) -> RunConfig:
    return RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                     batch_size=4, head_classes=2, **extra)


def parts(train: int = 8, valid: int = 4, batch: int = 4, seed: int = 0):
    """A two-class problem the linear model below gets partly right: train and validation loaders."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(train + valid, 3, generator=generator)
    y = (x[:, 0] > 0).long()
    return (DataLoader(TensorDataset(x[:train], y[:train]), batch_size=batch),
            DataLoader(TensorDataset(x[train:], y[train:]), batch_size=2))


def loaders_with(train, valid) -> datasets.Loaders:
    out = datasets.Loaders(train, valid, "synthetic", len(train.dataset), len(valid.dataset), {})
    out.valid, out.valid_samples = valid, len(valid.dataset)
    return out


def test_the_validation_pass_is_inside_the_timed_region_and_the_test_pass_is_not():
    cfg = config(epochs=2)
    model = torch.nn.Linear(3, 2)
    slow = lambda x: (time.sleep(PAUSE_S), model(x))[1]  # noqa: E731
    trainable = loop.Trainable(model, steps.plain_step(model, torch.optim.SGD(model.parameters(), lr=0.1)),
                               hooks=[bookkeeping.ValidationPass(slow, 2, CPU)])
    train, valid = parts()
    metrics = loop.train(trainable, loaders_with(train, valid), cfg, CPU)
    metrics.update(trainable.metrics)
    assert metrics["validation_passes"] == 2 and metrics["validation_batches_per_pass"] == 2
    assert metrics["validation_s"] >= 2 * 2 * PAUSE_S
    training_part = sum(metrics["epoch_times_s"])
    assert training_part < 2 * PAUSE_S  # epoch times are the training part only
    assert metrics["train_s"] == pytest.approx(training_part + metrics["validation_s"], abs=0.02)  # held inside
    assert len(metrics["val_accuracy_pct_per_epoch"]) == 2 and model.training
    before = metrics["train_s"]
    tested = evaluation.evaluate(trainable, valid, cfg, CPU)  # the test pass: after the clock, never in train_s
    assert tested["test_samples"] == 4 and metrics["train_s"] == before


def test_a_checkpoint_save_pauses_the_timed_window_and_is_kept_apart(tmp_path, monkeypatch):
    """The runner's checkpoint hook is untimed: each epoch's save (slowed here to PAUSE_S * 4) is in the
    record's checkpoint_save_s, not in train_s, while the source's validation pass beside it stays timed."""
    from pipelines.core.train import checkpoint, resume

    real_save = checkpoint.save
    monkeypatch.setattr(checkpoint, "save", lambda *a, **k: (time.sleep(4 * PAUSE_S), real_save(*a, **k))[1])
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    slow = lambda x: (time.sleep(PAUSE_S), model(x))[1]  # noqa: E731
    trainable = loop.Trainable(model, steps.plain_step(model, optimizer), optimizer=optimizer,
                               hooks=[bookkeeping.ValidationPass(slow, 2, CPU)])
    train, valid = parts()
    saves = resume.CheckpointHooks(tmp_path, every=1, is_main=True)
    metrics = loop.train(trainable, loaders_with(train, valid), config(epochs=2), CPU, hooks=[saves])
    metrics.update(trainable.metrics)
    assert (tmp_path / checkpoint.FILENAME).is_file()
    assert metrics["checkpoint_save_s"] >= 2 * 4 * PAUSE_S  # two epochs' saves (the final one is after the clock)
    assert metrics["train_s"] == pytest.approx(sum(metrics["epoch_times_s"]) + metrics["validation_s"], abs=0.02)


def test_validation_accuracy_is_correct_over_seen_in_eval_mode_without_gradients():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Dropout(0.9))
    seen_modes = []

    def forward(x):
        seen_modes.append((model.training, torch.is_grad_enabled()))
        return model(x)

    train, valid = parts(valid=6)
    trainable = loop.Trainable(model, lambda x, y: torch.tensor(0.0), hooks=[bookkeeping.ValidationPass(forward, 2,
                                                                                                       CPU)])
    metrics = loop.train(trainable, loaders_with(train, valid), config(epochs=1), CPU)
    model.eval()
    expected = 100.0 * sum(int((model(x).argmax(1) == y).sum()) for x, y in valid) / 6
    assert trainable.metrics["val_accuracy_pct_per_epoch"] == [pytest.approx(expected, abs=1e-3)]
    assert set(seen_modes) == {(False, False)} and metrics["epochs_completed"] == 1


def test_without_a_validation_part_the_pass_does_nothing_and_a_held_out_part_never_goes_unsaid():
    train, valid = parts()
    hook = bookkeeping.ValidationPass(None, 2, CPU)
    trainable = loop.Trainable(torch.nn.Linear(3, 2), lambda x, y: torch.tensor(0.0), hooks=[hook])
    plain = datasets.Loaders(train, valid, "synthetic", 8, 4, {})
    loop.train(trainable, plain, config(epochs=1), CPU)
    assert "validation_passes" not in trainable.metrics
    cfg = config(split="cvpr2023")
    assert recording.unvalidated(cfg, plain, {}) == []
    held = loaders_with(train, valid)
    (note,) = recording.unvalidated(cfg, held, {})
    assert "split cvpr2023 holds out 4 validation samples; this run made no validation pass" in note
    assert recording.unvalidated(cfg, held, {"validation_passes": 1}) == []


def test_the_talks_batch_log_counts_train_accuracy_and_reads_the_loss_every_n_batches():
    """Five batches an epoch, loss_every=2: lines at batches 0, 2, 4 of each epoch, as the talk's
    `if not batch_idx % 300`; the accuracy is the batches' argmax against their labels, epoch by epoch."""
    cfg = config(epochs=2)
    model = torch.nn.Linear(3, 2)
    log = bookkeeping.BatchLog(2, CPU, cfg.epochs, train_accuracy=True, loss_every=2)
    modes = []
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the weights stay: the accuracy is checkable
    step = steps.plain_step(model, optimizer, observe=lambda logits, y, loss: (modes.append(model.training),
                                                                                log(logits, y, loss)))
    train, valid = parts(train=20)
    trainable = loop.Trainable(model, step, hooks=[log])
    loop.train(trainable, loaders_with(train, valid), cfg, CPU)
    metrics = trainable.metrics
    assert [row[:2] for row in metrics["logged_losses"]] == [[1, 0], [1, 2], [1, 4], [2, 0], [2, 2], [2, 4]]
    assert all(isinstance(row[2], float) for row in metrics["logged_losses"]) and metrics["loss_every"] == 2
    with torch.no_grad():
        expected = 100.0 * sum(int((model(x).argmax(1) == y).sum()) for x, y in train) / 20
    assert metrics["train_accuracy_pct_per_epoch"] == [pytest.approx(expected, abs=1e-3)] * 2
    assert all(modes) and model.training  # back in train mode after each update, as the talk's next batch


def test_the_talk_entries_turn_the_bookkeeping_on_and_other_entries_do_not():
    for entry in experiments.all_experiments().values():
        settings = {**entry.settings}
        talk = entry.id.startswith("vit-")
        assert (settings.get("split") == "cvpr2023") == talk, entry.id
        if talk:
            assert entry.options.get("train_accuracy") is True and entry.options.get("loss_every") == 300, entry.id
        else:
            assert "train_accuracy" not in entry.options and "loss_every" not in entry.options, entry.id
    course = [e for e in experiments.all_experiments().values() if e.settings.get("dataset") == "imdb"]
    assert course and all(e.settings.get("split") == "dlf-imdb" for e in course)


def test_source_loop_builds_only_what_the_options_ask_for():
    class Opts(options.BookkeepingOptions):
        pass

    cfg = config(epochs=1)
    observe, hooks = bookkeeping.source_loop(Opts(), cfg, CPU)
    assert observe is None and [type(h) for h in hooks] == [bookkeeping.ValidationPass]
    observe, hooks = bookkeeping.source_loop(Opts(validate=False, train_accuracy=True, loss_every=300), cfg, CPU)
    assert isinstance(observe, bookkeeping.BatchLog) and hooks == [observe]
