import re

import pytest

from dataclasses import FrozenInstanceError, dataclass
from typing import Annotated, Literal

import click

from conftest import accel
from pipelines.core.config import options, runconfig
from pipelines.core.config.runconfig import SCALE_DEFAULTS, RunConfig, resolve
from pipelines.core.errors import ConfigError

BASE = dict(experiment="x", pipeline="p", variant="v")


def test_resolve_layers_scale_then_entry_then_user():
    entry = {"model": "cnn_fmnist", "dataset": "fashion_mnist", "batch_size": 64, "epochs": 10}
    cfg = resolve(entry, {}, {"batch_size": 128, "steps": None}, scale="bench", **BASE)
    assert cfg.batch_size == 128  # user wins
    assert cfg.epochs == 10  # entry kept
    assert cfg.steps == SCALE_DEFAULTS["bench"].steps  # None override does not erase the scale's value
    book = resolve(entry, {}, {}, scale="book", **BASE)
    assert book.steps is None and book.warmup_steps == 0 and book.repeats == 1


@dataclass(frozen=True)
class Knobs:
    bias: bool = True
    mode: Literal["default", "max-autotune"] = "default"
    sparsity: Annotated[float, click.FloatRange(0, 1, min_open=True, max_open=True)] = 0.5
    top: Annotated[int, click.IntRange(min=1)] = 3


def test_config_is_frozen_and_recordable():
    cfg = RunConfig(model="cnn_fmnist", dataset="synthetic", options=Knobs(bias=False, top=4), **BASE)
    with pytest.raises(AttributeError):
        cfg.batch_size = 3  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        cfg.options.bias = True  # type: ignore[misc]
    record = cfg.to_record()
    assert record["options"] == {"bias": False, "mode": "default", "sparsity": 0.5, "top": 4}
    assert record["data_root"] == "data"


@pytest.mark.parametrize("field,value,needle", [
    ("batch_size", 0, "--batch-size must be at least 1, got 0"),
    ("batch_size", -4, "got -4"),
    ("epochs", 0, "--epochs"),
    ("steps", 0, "--steps"),
    ("repeats", 0, "--repeats"),
    ("rounds", 0, "--rounds must be at least 1, got 0"),
    ("num_workers", -1, "--num-workers"),
    ("lr", 0.0, "--lr"),
    ("lr", float("inf"), "--lr must be a positive finite number"),
    ("lr", float("nan"), "--lr must be a positive finite number"),
    ("dataset", "imagenet", "unknown dataset 'imagenet'"),
    ("device", "tpu", "unknown device 'tpu'"),
    ("weights", "/nonexistent/w.pt", "weights file /nonexistent/w.pt does not exist"),
])
def test_bad_values_name_the_value(field, value, needle):
    kwargs = dict(model="cnn_fmnist", dataset="synthetic", **BASE)
    kwargs[field] = value
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        RunConfig(**kwargs)


def test_conflicting_loader_flags():
    with pytest.raises(ConfigError, match="prefetch-factor needs --num-workers"):
        RunConfig(model="m", dataset="synthetic", prefetch_factor=2, num_workers=0, **BASE)


def test_options_are_typed_checked_and_layered():
    built = options.build(Knobs, {"mode": "max-autotune"}, {"bias": "false", "sparsity": "0.25", "top": "7"})
    assert built == Knobs(bias=False, mode="max-autotune", sparsity=0.25, top=7)
    with pytest.raises(ConfigError, match="unknown option 'bogus'; this pipeline accepts: bias, mode, sparsity, top"):
        options.build(Knobs, {"bogus": 1})
    with pytest.raises(ConfigError, match="not a valid boolean"):
        options.build(Knobs, {"bias": "maybe"})
    with pytest.raises(ConfigError, match="not a valid float"):
        options.build(Knobs, {"sparsity": "half"})
    with pytest.raises(ConfigError, match=r"sparsity must be between 0 and 1 \(exclusive\), got 1.5"):
        options.build(Knobs, {"sparsity": "1.5"})
    with pytest.raises(ConfigError, match="top must be at least 1, got 0"):
        options.build(Knobs, {"top": 0})
    with pytest.raises(ConfigError, match="mode='fast' is unknown; choose one of: default, max-autotune"):
        options.build(Knobs, {"mode": "fast"})
    with pytest.raises(ConfigError, match="must be a finite number"):
        options.build(options.DistOptions, {"timeout_s": "inf"})


# ---- OMP_NUM_THREADS: a positive whole number, or a comma list of them ----

@pytest.mark.parametrize("value", ["1", "16", "4,2"])
def test_a_positive_omp_num_threads_or_a_nesting_list_is_accepted(value):
    runconfig.check_environment({"OMP_NUM_THREADS": value})


@pytest.mark.parametrize("value", ["abc", "0", "-1", "", " 4", "4,", "4,0", "2.5", "\u0663"])
def test_a_bad_omp_num_threads_is_refused_by_resolve(value, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.raises(ConfigError, match=re.escape(f"OMP_NUM_THREADS={value!r} is not a positive whole")):
        runconfig.resolve({"model": "cnn_cifar10", "dataset": "synthetic"}, None, {}, experiment="x",
                       pipeline="p", variant="v", scale="smoke")


def test_accel_run_refuses_a_bad_omp_num_threads_in_one_line(results_dir):
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--results-dir",
                str(results_dir), env={"OMP_NUM_THREADS": "abc"})
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0] == ("accel: error: OMP_NUM_THREADS='abc' is not a positive whole number (or a comma list "
                        "of them, one per nesting level); unset it or set e.g. OMP_NUM_THREADS=2")
    assert not results_dir.exists()


@pytest.mark.parametrize("command", ["run", "launch"])
def test_book_scale_with_rounds_plans_rounds_of_processes_and_without_runs_in_this_process(command,
                                                                                           accel_in_process):
    """`--rounds` means rounds of processes on `accel run` and `accel launch` alike; book scale without it
    runs its repeats in this process."""
    rounds = accel_in_process(command, "ch2-nobias", "--scale", "book", "--rounds", "3", "--dry-run")
    assert rounds.returncode == 0, rounds.stderr
    assert rounds.stdout.startswith("plan: ch2-nobias with its baseline ch2-baseline, in rounds of processes")
    assert "  rounds:    3 rounds (one process per slot below, ABBA)" in rounds.stdout
    here = accel_in_process(command, "ch2-nobias", "--scale", "book", "--dry-run")
    assert here.returncode == 0 and "in rounds of processes" not in here.stdout, here.stdout
