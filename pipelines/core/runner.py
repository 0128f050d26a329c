"""Runs one catalog experiment: plan (configs) -> refusals -> repeats of every variant -> results.

`plan` resolves one RunConfig per variant (typed options included). `run` decides, from the launcher's
variables, whether this process is one rank of a distributed run (then `dist.Session` joins the group
first) and runs every variant x repeat interleaved, so slow drift of the machine hits all variants
alike. Per repeat it builds the loaders, then either trains (the pipeline's `setup`, its optional
`before_training`, the shared loop, evaluation on rank 0) or measures (a `Measurement`'s `measure`).
Rank 0 writes one result file; a failure writes an `error` record first.
"""

from __future__ import annotations

import importlib
import os
import random
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch  # noqa: I001  (before numpy: libgomp binds this thread before OpenBLAS starts its pool,
import numpy as np  # so with GOMP_CPU_AFFINITY every thread of the process inherits a bound core)

from pipelines.core import (checkpoint, data, datafiles, dist, envinfo, experiments, loop, memory, models, options,
                            results)
from pipelines.core.config import RunConfig, resolve
from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.pipeline import Measurement, Pipeline, Preparation, TrainingPipeline, warmup_config


@dataclass
class Plan:
    experiment: experiments.Experiment
    pipeline: Pipeline
    configs: list[RunConfig]  # one per variant to run


@dataclass
class Outcome:
    path: Path | None
    records: list[dict[str, Any]]
    launched: bool = False  # one rank of a distributed run


def load_pipeline(name: str) -> Pipeline:
    module = importlib.import_module(f"pipelines.{name}")
    pipeline = getattr(module, "PIPELINE", None)
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"pipelines/{name}.py must expose PIPELINE, an instance of core.pipeline.Pipeline")
    return pipeline


def plan(experiment: experiments.Experiment, scale: str, overrides: Mapping[str, Any],
         option_overrides: Mapping[str, Any], only: tuple[str, ...] = ()) -> Plan:
    """One resolved RunConfig per variant (all of them, or those named in `only`)."""
    if experiment.status == "planned" or experiment.pipeline is None:
        raise NotRunnable(f"experiment {experiment.id} is planned, not implemented yet: "
                          f"{experiment.planned_reason or 'no pipeline exists for it'}")
    names = [variant.name for variant in experiment.variants]
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise ConfigError(f"unknown variant {', '.join(unknown)} of {experiment.id}; it has: {', '.join(names)}")
    pipeline = load_pipeline(experiment.pipeline)
    configs = []
    for variant in experiment.variants:
        if only and variant.name not in only:
            continue
        opts = options.build(pipeline.Options, experiment.options, variant.options, option_overrides)
        settings = {**experiment.settings, **variant.settings}
        smoke = smoke_settings(pipeline, settings) if scale == "smoke" else {}
        configs.append(resolve({**settings, **smoke}, opts, overrides,
                               experiment=experiment.id, pipeline=experiment.pipeline, variant=variant.name,
                               scale=scale))
    return Plan(experiment, pipeline, configs)


def smoke_settings(pipeline: Pipeline, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline's smoke settings; a model with a registered small sibling (vit_b_16 -> vit_tiny,
    distilbert -> distilbert_tiny) runs that sibling, whatever small model the pipeline names."""
    smoke = dict(pipeline.smoke_settings)
    model = settings.get("model")
    if model in models.REGISTRY and models.spec(model).smoke:
        smoke["model"] = models.spec(model).smoke
    return smoke


def dist_options(cfg: RunConfig) -> options.DistOptions:
    """The run's backend and timeout: the pipeline's own when it declares them, else the defaults."""
    return cfg.options if isinstance(cfg.options, options.DistOptions) else options.DistOptions()


def run(the_plan: Plan) -> Outcome:
    """Run the plan in this process: alone, or as the rank the launcher started (then rank 0 writes)."""
    first = the_plan.configs[0]
    place = dist.placement()
    device = torch.device(first.device)
    for cfg in the_plan.configs:
        _refuse_before_work(the_plan, cfg, loop.RunContext(device, place.rank, place.world_size))
    if not place.launched:
        return _run_variants(the_plan, loop.RunContext(device), dist.SINGLE_PROCESS)
    settings = dist_options(first)
    with dist.Session(place, settings.backend, first.device, settings.timeout_s) as session:
        return _run_variants(the_plan, session.ctx, session.describe(), session)


def seed_everything(seed: int | None) -> None:
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _run_variants(the_plan: Plan, ctx: loop.RunContext, dist_info: dict[str, Any], session=None) -> Outcome:
    """Every variant x repeat, interleaved (ABAB...); an error writes an error record, then re-raises."""
    configs = the_plan.configs
    skips = _skip_reasons(the_plan, ctx)
    run_id = results.new_run_id()
    path = results.result_path(configs[0].results_dir, the_plan.experiment.id, run_id)
    records: list[dict[str, Any]] = []
    cfg = configs[0]
    try:
        for repeat in range(max(c.repeats for c in configs)):
            for cfg in configs:
                if cfg.variant in skips:
                    if repeat == 0:
                        records.append(_record("skipped", cfg, run_id, 0, dist_info, notes=[skips[cfg.variant]]))
                elif repeat < cfg.repeats:
                    records.append(_run_repeat(the_plan.pipeline, cfg, ctx, repeat, run_id, dist_info))
    except ConfigError:
        raise  # a user mistake found late (e.g. missing data): no result file, one-line message
    except Exception as exc:
        error = _record("error", cfg, run_id, len(records), dist_info, error={
            "type": exc.__class__.__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]})
        if ctx.is_main:
            results.write(path, [*records, error])
        if session is not None:
            session.abort(exc, path if ctx.is_main else None)  # a broken group: one line, no teardown
        raise
    launched = session is not None
    if not ctx.is_main:
        return Outcome(None, records, launched)
    return Outcome(results.write(path, records), records, launched)


# (launcher knob, what it selects, what this process actually loaded)
RUNTIME_KNOBS = (("OMP_RUNTIME", "OpenMP runtime", lambda: envinfo.openmp_runtime()["openmp_runtime"]),
                 ("ALLOCATOR", "allocator", lambda: envinfo.allocator()["allocator"]))


def _refuse_before_work(the_plan: Plan, cfg: RunConfig, ctx: loop.RunContext) -> None:
    """Everything that can be refused before any work: device, runtime, backend, pipeline checks, data, results."""
    experiment = the_plan.experiment
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NotRunnable(f"{experiment.id} asks for --device cuda but no CUDA GPU is visible; "
                          "run it on a GPU machine or pass --device cpu")
    for knob, label, loaded_now in RUNTIME_KNOBS:  # launcher-owned choices: refuse a silent fallback
        wanted = os.environ.get(knob) or experiment.knobs.get(knob)
        if wanted in ("gnu", "intel", "tcmalloc", "jemalloc") and (loaded := loaded_now()) != wanted:
            raise NotRunnable(f"{experiment.id} needs the {wanted} {label} but {loaded} is loaded; start it "
                              f"with `make {experiment.id}` or `{knob}={wanted} launch/local.sh run {experiment.id}`")
    if isinstance(cfg.options, options.DistOptions):
        dist.check_backend(cfg.options.backend, cfg.device)
    data.check(cfg)
    the_plan.pipeline.check(cfg, cfg.options, ctx)
    if cfg.dataset != "synthetic":
        datafiles.verify(cfg.dataset, cfg.data_root)  # missing or damaged data: refuse before any work
    if ctx.is_main:
        results.check_writable(cfg.results_dir)


def _skip_reasons(the_plan: Plan, ctx: loop.RunContext) -> dict[str, str]:
    """Variant -> why it cannot run on this device (the pipeline's `skip`); all skipped: NotRunnable."""
    reasons = {cfg.variant: reason for cfg in the_plan.configs
               if (reason := the_plan.pipeline.skip(cfg, cfg.options, ctx))}
    if reasons and len(reasons) == len(the_plan.configs):
        raise NotRunnable(f"{the_plan.experiment.id}: nothing can run here: "
                          + "; ".join(sorted(set(reasons.values()))))
    return reasons


def _record(status: str, cfg: RunConfig, run_id: str, repeat: int, dist_info, **extra) -> dict[str, Any]:
    return results.make_record(status=status, run_id=run_id, config=cfg.to_record(), repeat=repeat, metrics={},
                               dist=dist_info, env=envinfo.fingerprint(), **extra)


def _run_repeat(pipeline: Pipeline, cfg: RunConfig, ctx: loop.RunContext, repeat: int, run_id: str,
                dist_info) -> dict[str, Any]:
    seed_everything(None if cfg.seed is None else cfg.seed + repeat)
    transforms = pipeline.transforms(cfg, cfg.options) or (None, None)
    loaders = data.loaders(cfg, data.input_shape(cfg), rank=ctx.rank, world_size=ctx.world_size,
                           train_transform=transforms[0], test_transform=transforms[1])
    if isinstance(pipeline, Measurement):
        measured = pipeline.measure(cfg, cfg.options, ctx, loaders)
        metrics, artifacts, notes = measured.metrics, measured.artifacts, []
    else:
        metrics, notes, artifacts = _train(pipeline, cfg, ctx, loaders)
    config = {**cfg.to_record(), "data_source": loaders.source, "train_samples": loaders.train_samples,
              "test_samples_available": loaders.test_samples, **loaders.details}
    return results.make_record(status="ok", run_id=run_id, config=config, repeat=repeat, metrics=metrics,
                               dist=dist_info, env=envinfo.fingerprint(), artifacts=artifacts, notes=notes)


def _train(pipeline: TrainingPipeline, cfg: RunConfig, ctx: loop.RunContext, loaders
           ) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """setup -> before_training -> the timed loop -> evaluation (rank 0); the technique's metrics added."""
    trainable = pipeline.setup(cfg, cfg.options, ctx)
    prep = Preparation(loaders, ctx, lambda t: loop.train(t, loaders, warmup_config(cfg), ctx))
    trainable = pipeline.before_training(trainable, prep, cfg, cfg.options, ctx)
    memory.reset_peak(ctx.device)
    metrics = loop.train(trainable, loaders, cfg, ctx, hooks=_runner_hooks(cfg, ctx))
    metrics["variant_peak_mib"] = memory.peak_mib(ctx.device)  # this variant's training alone
    if ctx.is_main:
        metrics.update(loop.evaluate(trainable, loaders.test, cfg, ctx))
    metrics["parameters"] = models.parameter_count(trainable.model)
    metrics.update(trainable.metrics)
    notes = list(trainable.notes)
    if cfg.pin_memory and ctx.device.type != "cuda":
        notes.append("pin_memory=True has no effect without a GPU: page-locked buffers only speed "
                      "host-to-GPU copies")
    return metrics, notes, trainable.artifacts


def _runner_hooks(cfg: RunConfig, ctx: loop.RunContext) -> list[loop.Hooks]:
    """Checkpoints, for pipelines that declare the checkpoint option group and set a folder."""
    opts = cfg.options
    if not isinstance(opts, options.CheckpointOptions) or not opts.checkpoint_dir:
        return []
    return [checkpoint.CheckpointHooks(Path(opts.checkpoint_dir), opts.checkpoint_every, ctx.is_main,
                                       dist.barrier_if_initialized)]
