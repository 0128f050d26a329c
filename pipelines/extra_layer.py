"""Chapter 1: what one extra fully connected layer costs in parameters (and how it trains).

The book's CNN with Linear(512 -> 256) inserted before the output layer, trained through the shared
loop as the book's saved run did; the record carries both parameter counts and their ratio.
"""

from __future__ import annotations

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step


class ExtraLayer(TrainingPipeline):
    def setup(self, cfg, ctx) -> Trainable:
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights, extra_fc=True)
        model = model.to(ctx.device)
        baseline = models.parameter_count(models.build(cfg.model, classes=cfg.head_classes))
        extra = models.parameter_count(model)
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)),
                         metrics={"baseline_parameters": baseline, "param_ratio": extra / baseline})


PIPELINE = ExtraLayer()
