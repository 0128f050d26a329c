"""Chapters 1 and 3: where the time goes, in eager mode and in compiled mode.

torch.profiler over one call, ops sorted by self CPU time; the shares are the comparable numbers, the
times are this machine's. This is a measurement, not a training run.

- Chapter 1 (`ch1-profile-ops`): one forward pass of a 64-image batch of the book's CNN, no warm-up, with
  autograd on as the book's `model(input_sample)` (no torch.no_grad).
- Chapter 3 (`ch3-profile-compiled`): one training step (forward, loss, backward, optimizer step) of the
  eager model and of `torch.compile(model)`, after `warmup` untimed steps so compilation is not profiled.
  In compiled mode AOTAutograd runs the captured graphs as one autograd function, so the profile shows
  `CompiledFunction` (forward) and `CompiledFunctionBackward` in place of the individual ops; their shares
  (CPU time including children, over the profile's total) are `share_CompiledFunction_pct` and
  `share_CompiledFunctionBackward_pct` (0 in eager mode).

Every op of the profile is recorded with its self-CPU share (`op_share_pct`, by the name today's profiler
gives it), so the report can judge every share the book printed, small ones included; which of today's
names stands for a printed one is pipelines/core/report/shares.py's (`PRINTED_AS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import click
import torch

from pipelines.core.train import models
from pipelines.core.train.profiler import profile_call
from pipelines.core.harness.pipeline import Measured, Measurement
from pipelines.core.train.steps import book_optimizer, plain_step

BOOK_OPS = ("aten::mkldnn_convolution", "aten::max_pool2d_with_indices", "aten::addmm", "aten::clamp_min")


@dataclass(frozen=True)
class Options:
    top_ops: Annotated[int, click.IntRange(min=1)] = 20  # rows of the profile table kept in the record
    step: Literal["forward", "train"] = "forward"  # one forward pass (autograd: `grad`), or one train step
    compile: bool = False
    warmup: Annotated[int, click.IntRange(min=0)] = 0  # untimed calls before the profiled one
    grad: bool = True  # a forward pass with autograd on, as the book's model(input_sample); False: no_grad


class Profile(Measurement[Options]):
    Options = Options

    def measure(self, cfg, ctx, loaders) -> Measured:
        opts: Options = cfg.options
        x, y = next(iter(loaders.train))
        x, y = x.to(ctx.device), y.to(ctx.device)
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        run = torch.compile(model) if opts.compile else model
        if opts.step == "train":
            step = plain_step(run, book_optimizer(model, cfg))
            call = lambda: step(x, y)  # noqa: E731
        else:
            def call():
                with torch.set_grad_enabled(opts.grad):
                    return run(x)
        for _ in range(opts.warmup):
            call()
        metrics, table = profile_call(call, opts.top_ops, x.is_cuda)
        for op in BOOK_OPS:
            metrics[f"share_{op.split('::')[1]}_pct"] = metrics["op_share_pct"].get(op, 0.0)
        metrics["parameters"] = models.parameter_count(model)
        return Measured(metrics, {"profile_table": table, "batch_shape": list(x.shape)})


PIPELINE = Profile()
