"""Chapter 3: eager mode vs torch.compile (modes and backends).

The same model and step run eagerly or through `torch.compile(model, mode=..., backend=...)`. The
first compiled steps include compilation: at bench scale they fall in the timed warm-up, at book
scale in the first epoch, and both first-epoch and median-epoch times are recorded as in Table 3.1.
Dynamo is reset before each model is built so variants do not share compiled graphs.

Compilation is cold by default (`cache=false`: inductor's on-disk caches off for the process), as it was
for the book: torch 2.0.0 had no compile cache, so every run compiled from scratch, and its end-to-end
times hold a whole compilation. With the caches on, a second process on this machine compiled the CPU CNN
in 1.4 s instead of 19.6 s, which would move a projected end-to-end ratio by 7 % (docs/timing.md).

With `profile=true` (chapter 3's CPU entry) each arm also records the book's other chapter 3 figure: when
its training ends, one forward pass of a training batch through the module it trained (eager, or the
compiled one, whose graph is then warm) is profiled, and the report judges the printed op shares against
it (core/train/profiler.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from pipelines.core.train import models
from pipelines.core.harness.pipeline import ConfigError, Trainable, TrainingPipeline
from pipelines.core.train.profiler import ProfileAfterTraining
from pipelines.core.train.steps import book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    compile: bool = True
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    backend: str = "inductor"  # any of torch._dynamo.list_backends() (checked against this torch)
    fullgraph: bool = False
    cache: bool = False  # inductor's on-disk caches (false: compile cold, as torch 2.0.0, the book's, always did)
    profile: bool = False  # after training: one forward pass profiled, for the book's op-share tables


class Compile(TrainingPipeline[Options]):
    Options = Options
    process_options = ("cache",)  # torch._inductor.config holds for every compile of the process

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        if not opts.compile:
            return
        backends = torch._dynamo.list_backends(exclude_tags=())
        if opts.backend not in backends:
            raise ConfigError(f"option backend={opts.backend!r} is not available in torch "
                              f"{torch.__version__}; available: {', '.join(backends)}")
        if opts.backend != "inductor" and opts.mode != "default":
            raise ConfigError("option mode applies to the inductor backend only; drop mode= or use "
                              "backend=inductor")

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        optimizer = book_optimizer(model, cfg)
        if not opts.compile:
            return Trainable(model, plain_step(model, optimizer), hooks=self._profiled(model, opts, ctx))
        import torch._inductor.config as inductor_config

        # smoke scale proves the code path and judges no figure: its compiles may reuse the caches
        inductor_config.force_disable_caches = not opts.cache and cfg.scale != "smoke"
        kwargs = {"backend": opts.backend, "fullgraph": opts.fullgraph}
        if opts.backend == "inductor":
            kwargs["mode"] = opts.mode
        compiled = torch.compile(model, **kwargs)
        backends = ", ".join(torch._dynamo.list_backends())
        # evaluation at bench scale is a learning check on the same weights: the eager model gives it without a
        # second compilation (eval mode is another graph: a cold compile of its own, outside any timing)
        return Trainable(model, plain_step(compiled, optimizer), predict=compiled if cfg.scale == "book" else None,
                         hooks=self._profiled(compiled, opts, ctx), notes=[f"torch.compile({kwargs}); inductor caches "
                                f"{'off (cold)' if inductor_config.force_disable_caches else 'on'}; "
                                f"dynamo backends here: {backends}"])

    @staticmethod
    def _profiled(trained, opts: Options, ctx) -> list:
        return [ProfileAfterTraining.forward_pass(trained, ctx.device)] if opts.profile else []


PIPELINE = Compile()
