"""Chapter 3: eager mode vs torch.compile (modes and backends).

The same model and step run eagerly or through `torch.compile(model, mode=..., backend=...)`. The
first compiled steps include compilation: at bench scale they fall in the timed warm-up, at book
scale in the first epoch, and both first-epoch and median-epoch times are recorded as in Table 3.1.
Dynamo is reset before each model is built so variants do not share compiled graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from pipelines.core.train import models
from pipelines.core.errors import ConfigError
from pipelines.core.train.loop import Trainable
from pipelines.core.run.pipeline import TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    compile: bool = True
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    backend: str = "inductor"  # any of torch._dynamo.list_backends() (checked against this torch)
    fullgraph: bool = False


class Compile(TrainingPipeline):
    Options = Options

    def check(self, cfg, opts: Options, ctx) -> None:
        if not opts.compile:
            return
        backends = torch._dynamo.list_backends(exclude_tags=())
        if opts.backend not in backends:
            raise ConfigError(f"option backend={opts.backend!r} is not available in torch "
                              f"{torch.__version__}; available: {', '.join(backends)}")
        if opts.backend != "inductor" and opts.mode != "default":
            raise ConfigError("option mode applies to the inductor backend only; drop mode= or use "
                              "backend=inductor")

    def setup(self, cfg, opts: Options, ctx) -> Trainable:
        torch._dynamo.reset()
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        optimizer = book_optimizer(model, cfg)
        if not opts.compile:
            return Trainable(model, plain_step(model, optimizer))
        kwargs = {"backend": opts.backend, "fullgraph": opts.fullgraph}
        if opts.backend == "inductor":
            kwargs["mode"] = opts.mode
        compiled = torch.compile(model, **kwargs)
        backends = ", ".join(torch._dynamo.list_backends())
        return Trainable(model, plain_step(compiled, optimizer), predict=compiled,
                         notes=[f"torch.compile({kwargs}); dynamo backends here: {backends}"])


PIPELINE = Compile()
