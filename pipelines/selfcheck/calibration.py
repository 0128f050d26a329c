"""The harness's own check: the same arm against itself, and arms slowed by a known amount.

Not a technique of any source. `ci/calibrate-intervals.py` runs the `harness-calibration` entry many times
through the whole stopping rule, to show what the paired intervals are worth on this machine: the A/A arm
(`a-again`, built exactly as `a`) must give intervals that hold 1.00 about 95 % of the time, and the slowed
arms must be found, with intervals that cover the slow-down injected.

The slow-down is extra work inside the step: after the book's CNN step, the host spins for `slowdown` times
the step's own duration, so the arm's compute takes (1 + slowdown) times as long. The loader's time is not
slowed, so the throughput ratio injected is (compute + data) / (compute x (1 + slowdown) + data), which the
script computes from each run's records (a 5 % slow-down with 8 % of the step in data loading is 0.954).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

import click

from pipelines.core.harness.pipeline import Trainable, TrainingPipeline
from pipelines.core.train import models
from pipelines.core.train.steps import book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    slowdown: Annotated[float, click.FloatRange(0, 10)] = 0.0  # extra host work, as a fraction of the step


def spin(seconds: float) -> None:
    """Busy work on the host for `seconds` (a sleep would hand the core to someone else)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Calibration(TrainingPipeline[Options]):
    Options = Options

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        step = plain_step(model, book_optimizer(model, cfg))
        if not opts.slowdown:
            return Trainable(model, step)

        def slowed(x, y):
            started = time.perf_counter()
            loss = step(x, y)
            spin((time.perf_counter() - started) * opts.slowdown)
            return loss

        return Trainable(model, slowed, notes=[f"calibration: {opts.slowdown:.0%} extra host work per step"])


PIPELINE = Calibration()
