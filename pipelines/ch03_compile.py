"""Chapter 3: eager mode vs torch.compile (modes and backends).

The same model and step run eagerly or through `torch.compile(model, mode=..., backend=...)`. The
first compiled steps include compilation: at bench scale they fall in the timed warm-up, at book
scale in the first epoch, and both first-epoch and median-epoch times are recorded as in Table 3.1.
Dynamo is reset before each model is built so variants do not share compiled graphs.
"""

from __future__ import annotations

import torch

from pipelines.core import loop, models
from pipelines.core.config import ConfigError
from pipelines.core.steps import book_optimizer, plain_step

OPTIONS = {"compile": True, "mode": "default", "backend": "inductor", "fullgraph": False}
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def check(cfg, ctx) -> None:
    if not cfg.options["compile"]:
        return
    if cfg.options["mode"] not in MODES:
        raise ConfigError(f"option mode={cfg.options['mode']!r} is unknown; choose one of: {', '.join(MODES)}")
    backends = torch._dynamo.list_backends(exclude_tags=())
    if cfg.options["backend"] not in backends:
        raise ConfigError(f"option backend={cfg.options['backend']!r} is not available in torch "
                          f"{torch.__version__}; available: {', '.join(backends)}")
    if cfg.options["backend"] != "inductor" and cfg.options["mode"] != "default":
        raise ConfigError("option mode applies to the inductor backend only; drop mode= or use backend=inductor")


def setup(cfg, ctx) -> loop.Trainable:
    torch._dynamo.reset()
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
    optimizer = book_optimizer(model, cfg)
    if not cfg.options["compile"]:
        return loop.Trainable(model, plain_step(model, optimizer))
    kwargs = {"backend": cfg.options["backend"], "fullgraph": cfg.options["fullgraph"]}
    if cfg.options["backend"] == "inductor":
        kwargs["mode"] = cfg.options["mode"]
    compiled = torch.compile(model, **kwargs)
    backends = ", ".join(torch._dynamo.list_backends())
    return loop.Trainable(model, plain_step(compiled, optimizer), predict=compiled,
                          notes=[f"torch.compile({kwargs}); dynamo backends here: {backends}"])
