"""Course unit 9: compiled inference. The same model predicts test batches eagerly or through torch.compile.

The model is put in eval mode and called under `torch.no_grad()` on batches of the test set. The first
`warmup` calls (where compilation happens in the compiled arm) are timed apart; then `steps` batches are
timed (the run's steps; at book scale the whole test set), the device synchronized around each call.
Both arms hold the same weights (same seed), so the compiled arm's logits are checked against the eager
model's on every timed batch: `max_abs_diff_vs_eager` and `argmax_agreement_pct` say compilation did not
change the predictions. This is a measurement, not a training run.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from typing import Annotated, Literal

import click
import torch

from pipelines.core.train import models, microbench
from pipelines.core.harness.pipeline import Measured, Measurement


@dataclass(frozen=True)
class Options:
    compile: bool = False
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    warmup: Annotated[int, click.IntRange(min=1)] = 2  # untimed-apart calls: compilation lands here


class CompiledInference(Measurement[Options]):
    Options = Options
    smoke_settings = {"batch_size": 8}

    def measure(self, cfg, ctx, loaders) -> Measured:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device).eval()
        predict = torch.compile(model, mode=opts.mode) if opts.compile else model
        batches = len(loaders.test) if cfg.steps is None else cfg.steps
        inputs = [(x.to(ctx.device),) for x, _ in itertools.islice(itertools.cycle(loaders.test),
                                                                    opts.warmup + batches)]
        with torch.no_grad():
            timed = microbench.time_calls(predict, inputs, ctx.device, opts.warmup)
            eager = [model(x) for (x,) in inputs[opts.warmup:]]
        diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(timed.outputs, eager))
        agree = sum(int((a.argmax(1) == b.argmax(1)).sum()) for a, b in zip(timed.outputs, eager))
        samples = sum(len(x) for (x,) in inputs[opts.warmup:])
        metrics = {
            "warmup_s": timed.warmup_s, "warmup_steps": opts.warmup, "measured_steps": len(timed.times_s),
            "step_times_s": [round(t, 7) for t in timed.times_s], "samples_per_step": cfg.batch_size,
            "step_time_ms_median": statistics.median(timed.times_s) * 1e3,
            "throughput_samples_per_s": samples / sum(timed.times_s),
            "max_abs_diff_vs_eager": diff, "argmax_agreement_pct": 100.0 * agree / samples,
            "parameters": models.parameter_count(model)}
        return Measured(metrics)


PIPELINE = CompiledInference()
