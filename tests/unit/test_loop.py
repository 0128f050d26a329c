import time

import pytest
import torch

from pipelines.core.data import datasets
from pipelines.core.train import evaluation, loop, record_metrics
from pipelines.core.config.runconfig import RunConfig


def test_percentile_matches_linear_interpolation():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert record_metrics.percentile(values, 50) == 3.0
    assert record_metrics.percentile(values, 90) == pytest.approx(4.6)
    assert record_metrics.percentile([7.0], 90) == 7.0


def _setup(steps=6, warmup=2, batch=4, epochs=1):
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                    batch_size=batch, steps=steps, warmup_steps=warmup, epochs=epochs)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))
    return cfg, model, datasets.loaders(cfg, (1, 28, 28))


def test_warmup_is_timed_apart_and_steps_are_counted():
    cfg, model, loaders = _setup()
    calls = []

    def step(x, y):  # warm-up steps are slow (as compilation is), measured steps fast
        calls.append(len(x))
        time.sleep(0.05 if len(calls) <= cfg.warmup_steps else 0.005)
        return torch.tensor(1.0)

    metrics = loop.train(loop.Trainable(model, step), loaders, cfg, loop.RunContext(torch.device("cpu")))
    assert len(calls) == 8 and metrics["measured_steps"] == 6 and metrics["warmup_steps"] == 2
    assert metrics["warmup_s"] >= 0.1
    assert 5 <= metrics["step_time_ms_median"] < 50  # the slow warm-up steps are not in the median
    assert metrics["train_s"] >= 6 * 0.005
    assert metrics["throughput_samples_per_s"] == pytest.approx(6 * 4 / metrics["train_s"])
    assert metrics["data_wait_s"] + metrics["compute_s"] <= metrics["train_s"] + 1e-6
    # forward 2*B*in*out, backward only the weight gradient (the input needs none): 2 x forward
    assert metrics["flops_per_step"] == 2 * (2 * 4 * 28 * 28 * 10)


def test_epoch_mode_runs_whole_epochs_and_reports_first_and_median():
    cfg, model, loaders = _setup(steps=None, warmup=0, batch=64, epochs=3)
    per_epoch = len(loaders.train)
    seen = []
    metrics = loop.train(loop.Trainable(model, lambda x, y: seen.append(1) or torch.tensor(0.5)), loaders,
                         cfg, loop.RunContext(torch.device("cpu")))
    assert len(seen) == 3 * per_epoch and metrics["epochs_completed"] == 3
    assert len(metrics["epoch_times_s"]) == 3 and metrics["epoch_last_loss"] == [0.5] * 3
    assert metrics["median_epoch_s"] is not None and metrics["first_epoch_s"] == metrics["epoch_times_s"][0]


def test_evaluation_is_outside_training_time_and_restores_train_mode():
    cfg, model, loaders = _setup()
    trainable = loop.Trainable(model, lambda x, y: torch.tensor(0.0))
    metrics = loop.train(trainable, loaders, cfg, loop.RunContext(torch.device("cpu")))
    before = dict(metrics)
    result = evaluation.evaluate(trainable, loaders.test, cfg, loop.RunContext(torch.device("cpu")))
    assert metrics == before and model.training
    assert 0 <= result["test_accuracy_pct"] <= 100 and result["test_samples"] == len(loaders.test.dataset)


class _HostEvent:
    """Stands in for torch.cuda.Event on a CPU machine: record() notes the host time; no GPU here."""

    def record(self):
        self.at = time.perf_counter()

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3  # milliseconds, as CUDA events report


def test_event_clock_reads_the_device_once_per_window_not_per_step(monkeypatch):
    """The GPU path's bookkeeping, run on a CPU: an EventClock whose events are host stand-ins. Three
    marks per step, but the clock waits for the device only when a window ends (warm-up end, epoch end,
    the end): a per-step synchronization would serialize host and device on a real GPU."""
    from pipelines.core.train import clocks

    syncs = []
    clock = clocks.EventClock(_HostEvent, lambda: syncs.append(1))
    monkeypatch.setattr(clocks, "for_device", lambda device: clock)
    cfg, model, loaders = _setup(steps=12, warmup=3)

    def step(x, y):
        time.sleep(0.02 if clock.settles == 0 else 0.004)  # warm-up slow; no window read before it ends
        return torch.tensor(1.0)

    metrics = loop.train(loop.Trainable(model, step, count_flops=False), loaders, cfg,
                         loop.RunContext(torch.device("cpu")))
    assert metrics["measured_steps"] == 12 and len(metrics["step_times_s"]) == 12
    assert clock.settles == len(syncs) <= 3  # warm-up end, (an epoch end), the end: never once per step
    assert metrics["warmup_s"] >= 3 * 0.02 and 4 <= metrics["step_time_ms_median"] < 20
    assert sum(metrics["step_times_s"]) == pytest.approx(metrics["data_wait_s"] + metrics["compute_s"], abs=1e-5)
    assert metrics["compute_s"] >= 12 * 0.004 and metrics["train_s"] >= sum(metrics["step_times_s"]) - 1e-3


def test_event_clock_bounds_its_unread_events_on_long_epochs(monkeypatch):
    from pipelines.core.train import clocks

    clock = clocks.EventClock(_HostEvent, lambda: None)
    monkeypatch.setattr(clocks, "for_device", lambda device: clock)
    monkeypatch.setattr(loop, "SETTLE_EVERY", 4)
    cfg, model, loaders = _setup(steps=16, warmup=0)
    metrics = loop.train(loop.Trainable(model, lambda x, y: torch.tensor(1.0), count_flops=False), loaders,
                         cfg, loop.RunContext(torch.device("cpu")))
    assert metrics["measured_steps"] == 16 and clock.settles >= 4  # read every 4 steps, nothing lost


def test_cpu_uses_the_host_clock_and_cuda_the_event_clock():
    from pipelines.core.train import clocks

    assert isinstance(clocks.for_device(torch.device("cpu")), clocks.HostClock)
    assert isinstance(clocks.for_device(torch.device("cuda")), clocks.EventClock)  # built lazily: no GPU needed
