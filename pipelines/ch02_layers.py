"""Chapter 2: the application layer (bias on/off, batch size) and the environment layer (OpenMP runtime).

The technique here is in the catalog's settings, not in code: `bias` removes the bias of all four
layers, `batch_size` changes the steps per epoch. The Intel OpenMP variant is the same code started
by `launch/local.sh` with OMP_RUNTIME=intel, which preloads libiomp5 before Python starts; the run
refuses to start if the runtime that actually loaded is not the one the experiment asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    bias: bool = True  # False removes the bias of all four layers (ch2-nobias)


class Layers(TrainingPipeline[Options]):
    Options = Options

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights, bias=opts.bias)
        model = model.to(ctx.device)
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)))


PIPELINE = Layers()
