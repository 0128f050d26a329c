"""The plan: one resolved RunConfig per variant of a catalog entry, and the technique file that runs it.

`plan` refuses a planned entry or an unknown variant, loads `pipelines/<name>.py` (its PIPELINE) and
resolves settings + the variant's options + the command line's overrides; at smoke scale a model with a
registered small sibling runs that sibling. Nothing here touches data, devices or processes.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.config import experiments, options
from pipelines.core.config.runconfig import RunConfig, resolve

if TYPE_CHECKING:  # torch loads with the pipeline, after the request's id and arms are checked
    from pipelines.core.harness.pipeline import Pipeline


@dataclass
class Plan:
    experiment: experiments.Experiment
    pipeline: Pipeline
    configs: list[RunConfig]  # one per variant to run


def load_pipeline(name: str) -> Pipeline:
    from pipelines.core.harness.pipeline import Pipeline

    module = importlib.import_module(f"pipelines.{name}")
    pipeline = getattr(module, "PIPELINE", None)
    if not isinstance(pipeline, Pipeline):
        path = name.replace(".", "/")
        raise TypeError(f"pipelines/{path}.py must expose PIPELINE, an instance of harness.pipeline.Pipeline")
    return pipeline


def plan(experiment: experiments.Experiment, scale: str, overrides: Mapping[str, Any],
         option_overrides: Mapping[str, Any], only: tuple[str, ...] = ()) -> Plan:
    """One resolved RunConfig per variant (all of them, or those named in `only`)."""
    if experiment.status == "planned" or experiment.pipeline is None:
        raise NotRunnable(f"experiment {experiment.id} is planned, not implemented yet: "
                          f"{experiment.planned_reason or 'no pipeline exists for it'}")
    if unknown := [name for name in only if experiment.arm(name) is None]:
        raise ConfigError(experiment.unknown_arm(unknown[0]))
    declared = [variant.name for variant in experiment.variants]
    arms = [*experiment.variants, *(experiment.arm(name) for name in dict.fromkeys(only) if name not in declared)]
    pipeline = load_pipeline(experiment.pipeline)
    configs = []
    for variant in arms:
        if only and variant.name not in only:
            continue
        opts = options.build(pipeline.Options, experiment.options, variant.options, option_overrides)
        settings = {**experiment.settings, **variant.settings}
        if experiment.cpu_form and scale != "smoke" and overrides.get("device") == "cpu":
            settings.update(cpu_form_settings(experiment, settings))
        smoke = smoke_settings(pipeline, settings) if scale == "smoke" else {}
        configs.append(resolve({**settings, **smoke}, opts, overrides,
                               experiment=experiment.id, pipeline=experiment.pipeline, variant=variant.name,
                               scale=scale))
    return Plan(experiment, pipeline, configs)


def cpu_form_settings(experiment: experiments.Experiment, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A GPU entry asked to run on CPU: its declared CPU form (ch7's EfficientNet-B0 at batch 64 instead of
    B7 at 2048, which plans hours), host memory not pinned (no accelerator to copy to), and DataLoader
    workers that follow the machine: at most one per 4 usable cores (2 cores: none, the batches load in
    the training process instead of taking a core from it)."""
    form = dict(experiment.cpu_form)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    form.setdefault("pin_memory", False)
    form.setdefault("num_workers", min(int(settings.get("num_workers") or 0), usable // 4))
    if form["num_workers"] == 0:
        form.update(persistent_workers=False, prefetch_factor=None)
    published = ", ".join(f"{key} {settings.get(key)}" for key in ("model", "batch_size") if key in form)
    changed = ", ".join(f"{key} {form[key]}" for key in ("model", "batch_size") if key in form)
    form["stand_in"] = (f"CPU form of a GPU entry: {changed} stands in for the published {published}; "
                        f"num_workers {form['num_workers']} ({usable} usable cores), pin_memory "
                        f"{form['pin_memory']} (no accelerator)")
    return form


def smoke_settings(pipeline: Pipeline, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline's smoke settings; a model with a registered small sibling (vit_b_16 -> vit_tiny,
    distilbert -> distilbert_tiny) runs that sibling, whatever small model the pipeline names."""
    from pipelines.core.train import models

    smoke = dict(pipeline.smoke_settings)
    model = settings.get("model")
    if model in models.REGISTRY and models.spec(model).smoke:
        smoke["model"] = models.spec(model).smoke
    return smoke


def dist_options(the_plan: Plan) -> options.DistOptions:
    """The run's backend and timeout: the pipeline's own when it declares collective backends (its
    Options then carry them), else the defaults."""
    first = the_plan.configs[0]
    return first.options if the_plan.pipeline.supports.backends else options.DistOptions()
