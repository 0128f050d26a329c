"""Progress: tqdm bars on a terminal (a real pseudo-terminal here), none in a pipe, under CI or with
--quiet; --verbose logs one line per epoch; the loop calls `step_end` once per step after its clock
stopped; every record carries the loss curve, at most LOSS_CURVE_POINTS bin means."""

from __future__ import annotations

import fcntl
import math
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import numpy as np
import pytest
import torch

from conftest import REPO, accel, records
from pipelines.core.data import datasets
from pipelines.core.train import loop, progress, step_losses
from pipelines.core.config.runconfig import RunConfig

BAR_MARKS = ("\r", "it/s", "step/s", "s/step", "%|")  # what a tqdm bar writes; a log must hold none
# a run in this process (smoke and book scale; a bench run's rounds print one line each instead)
RUN = ("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--repeats", "2", "--steps", "15",
       "--warmup-steps", "1")


def under_terminal(*args: str, env: dict | None = None, timeout: float = 300) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal (as in an interactive shell); all output."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a 160-column window
    environment = {k: v for k, v in os.environ.items() if k != "CI"}
    process = subprocess.Popen([sys.executable, "-m", "pipelines", *args], cwd=REPO, stdin=subprocess.DEVNULL,
                               stdout=secondary, stderr=secondary, env={**environment, **(env or {})},
                               close_fds=True)
    os.close(secondary)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif process.poll() is not None:
            break
    os.close(primary)
    code = process.wait(timeout=30)
    return code, b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_terminal_run_shows_bars_with_rate_and_eta(tmp_path):
    code, out = under_terminal(*RUN, "--results-dir", str(tmp_path))
    assert code == 0, out
    assert "\r" in out and "%|" in out  # tqdm redraws in place
    assert "ch2-baseline" in out and ("run/s" in out or "s/run" in out)  # the outer bar: variants x repeats
    assert "step/s" in out or "s/step" in out  # the step bar's rate
    assert "<" in out  # elapsed<remaining: the ETA
    assert "2/2" in out  # the outer bar finished both repeats
    assert len(records(tmp_path)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("how", ["quiet", "CI"])
def test_terminal_without_bars_when_asked(tmp_path, how):
    extra, env = (["--quiet"], {}) if how == "quiet" else ([], {"CI": "true"})
    code, out = under_terminal(*RUN, "--results-dir", str(tmp_path), *extra, env=env)
    assert code == 0, out
    assert not any(mark in out.replace("\r\n", "\n") for mark in BAR_MARKS), out


@pytest.mark.slow
def test_pipe_gets_no_bar_characters_and_verbose_logs_each_epoch(tmp_path):
    run = accel("run", "ch3-compile-cnn-cpu", "--variant", "eager", "--scale", "book", "--epochs", "2",
                "--dataset", "synthetic", "--verbose", "--results-dir", str(tmp_path), env={"CI": ""})
    assert run.returncode == 0, run.stderr
    assert not any(mark in run.stdout + run.stderr for mark in BAR_MARKS)
    epochs = [line for line in run.stderr.splitlines() if " epoch " in line]
    assert [line.split(" epoch ")[1].split()[0] for line in epochs] == ["1/2", "2/2"]
    assert all(" loss " in line for line in epochs)
    (rec,) = records(tmp_path)
    assert rec["metrics"]["epoch_last_loss"] == pytest.approx(
        [float(line.split(" loss ")[1].split()[0]) for line in epochs], rel=1e-3)


@pytest.mark.slow
def test_a_bench_round_shows_a_live_line_on_a_terminal_and_a_pipe_gets_the_round_lines_alone(tmp_path):
    """harness/live.py: while a round's process runs, the round, the process, the block its worker finished and
    the time, redrawn in place; then cleared, and the round's own line follows. In a pipe: the round line only."""
    bench = ("run", "ch2-nobias", "--dataset", "synthetic", "--rounds", "1", "--blocks", "4", "--block-s", "0.3")
    code, out = under_terminal(*bench, "--results-dir", str(tmp_path / "tty"))
    assert code == 0, out
    drawn = [part for part in out.replace("\r\n", "\n").split("\r") if "this process" in part]
    assert any("round 1/1: ch2-baseline [baseline] + ch2-nobias [nobias]: block " in part for part in drawn), drawn
    assert any(re.search(r"block 8 of 8 \(ch2-(nobias|baseline) \[\w+\]\)", part) for part in drawn), drawn
    assert re.search(r"round 1/1: ch2-baseline \[baseline\] \+ ch2-nobias \[nobias\] \d+ s; ", out)
    piped = accel(*bench, "--results-dir", str(tmp_path / "pipe"), env={"CI": ""})
    assert piped.returncode == 0 and "this process" not in piped.stderr and "\r" not in piped.stderr


def test_terminal_detection():
    class Tty:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    assert progress.terminal({}, (Tty(True), Tty(True)))
    assert not progress.terminal({"CI": "true"}, (Tty(True), Tty(True)))
    assert not progress.terminal({}, (Tty(False), Tty(True)))  # stdout to a file: no bars on stderr either
    assert not progress.terminal({}, (Tty(True), Tty(False)))


def _setup(steps=None, warmup=0, batch=16, epochs=2):
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                    batch_size=batch, steps=steps, warmup_steps=warmup, epochs=epochs)
    return cfg, torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10)), \
        datasets.loaders(cfg, (1, 28, 28))


def test_step_end_runs_once_per_step_and_counts_for_an_interrupted_record():
    cfg, model, loaders = _setup()
    counter = progress.RepeatProgress("x", cfg.epochs, None, progress.OFF)
    seen = []

    class Spy(loop.Hooks):
        def step_end(self, done):
            seen.append(done)

    loop.train(loop.Trainable(model, lambda x, y: torch.tensor(1.0)), loaders, cfg,
               loop.RunContext(torch.device("cpu")), hooks=[Spy(), counter])
    per_epoch = len(loaders.train)
    assert seen == list(range(1, 2 * per_epoch + 1))
    assert counter.how_far() == {"steps_done": 2 * per_epoch, "steps_planned": 2 * per_epoch, "epochs_done": 2,
                                 "epochs_planned": 2}


def test_every_step_loss_reaches_the_curve():
    cfg, model, loaders = _setup(steps=10, warmup=2)
    losses = iter(range(100))
    metrics = loop.train(loop.Trainable(model, lambda x, y: torch.tensor(float(next(losses)))), loaders, cfg,
                         loop.RunContext(torch.device("cpu")))
    assert metrics["loss_curve"] == {"step": list(range(1, 13)), "loss": [float(i) for i in range(12)]}


def test_loss_curve_is_binned_to_at_most_200_means():
    values = np.arange(1000, dtype=float)
    values[3] = math.nan
    curve = step_losses.loss_curve(values)
    assert len(curve["step"]) == len(curve["loss"]) == step_losses.LOSS_CURVE_POINTS
    assert curve["step"][0] == 5 and curve["step"][-1] == 1000  # each bin: its last step, 1-based
    assert curve["loss"][0] is None  # a non-finite bin mean is null, never NaN in JSON
    assert curve["loss"][1] == pytest.approx(np.mean(range(5, 10))) and curve["loss"][-1] == pytest.approx(997)
    assert step_losses.loss_curve(np.array([])) == {"step": [], "loss": []}
