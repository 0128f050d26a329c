"""Runs one catalog experiment: config -> data -> repeats of (pipeline setup, loop, evaluate) -> results.

A pipeline module provides `OPTIONS` (its option defaults) and either
- `setup(cfg, ctx) -> Trainable`: a training technique, run by the shared loop; or
- `analyze(cfg, ctx, loaders) -> (metrics, artifacts)`: a measurement that is not a training run.
It may also provide `check(cfg, ctx)` to refuse an unsupported combination before anything runs,
`transforms(cfg) -> (train_transform, test_transform)` when its technique is the input pipeline,
and `skip(cfg, ctx) -> str | None` to name why one variant cannot run on this device: that variant
gets a "skipped" record carrying the reason while the others run (all skipped: NotRunnable, exit 3).
"""

from __future__ import annotations

import importlib
import os
import random
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

from pipelines.core import experiments, results
from pipelines.core.config import ConfigError, RunConfig, merge_options, resolve


class NotRunnable(ConfigError):
    """The experiment exists but cannot run here (planned, or a capability is missing)."""


@dataclass
class Outcome:
    path: Path | None
    records: list[dict[str, Any]]


def pipeline_module(name: str) -> ModuleType:
    return importlib.import_module(f"pipelines.{name}")


def build_configs(entry: experiments.Experiment, scale: str, overrides: Mapping[str, Any],
                  option_overrides: Mapping[str, Any], only: tuple[str, ...] = ()
                  ) -> tuple[list[RunConfig], ModuleType]:
    """One resolved RunConfig per variant (all of them, or those named in `only`)."""
    if entry.status == "planned" or entry.pipeline is None:
        raise NotRunnable(f"experiment {entry.id} is planned, not implemented yet: "
                          f"{entry.planned_reason or 'no pipeline exists for it'}")
    arms = entry.variants
    unknown = sorted(set(only) - {arm.name for arm in arms})
    if unknown:
        raise ConfigError(f"unknown variant {', '.join(unknown)} of {entry.id}; it has: "
                          f"{', '.join(arm.name for arm in arms)}")
    module = pipeline_module(entry.pipeline)
    smoke_args = dict(getattr(module, "SMOKE_ARGS", {})) if scale == "smoke" else {}
    configs = []
    for arm in arms:
        if only and arm.name not in only:
            continue
        options = merge_options(getattr(module, "OPTIONS", {}), entry.options, arm.options,
                                option_overrides)
        configs.append(resolve({**entry.settings, **arm.settings, **smoke_args}, options, overrides,
                               experiment=entry.id, pipeline=entry.pipeline, variant=arm.name,
                               scale=scale))
    return configs, module


def seed_everything(seed: int | None) -> None:
    import numpy as np
    import torch

    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def run(entry: experiments.Experiment, configs: list[RunConfig], module: ModuleType, ctx=None,
        dist_info: dict[str, Any] | None = None, hooks=None) -> Outcome:
    """Run every variant x repeat, interleaved; rank 0 writes one result file. Errors write an error record."""
    import torch

    from pipelines.core import loop

    first = configs[0]
    ctx = ctx or loop.RunContext(device=torch.device(first.device))
    for cfg in configs:
        _preflight(entry, cfg, module, ctx)
    skips = _skip_reasons(entry, configs, module, ctx)
    dist_info = dist_info or {"launcher": "local", "backend": None, "world_size": 1, "nodes": 1}
    run_id = results.new_run_id()
    path = results.result_path(first.results_dir, entry.id, run_id)
    records: list[dict[str, Any]] = []
    cfg = first
    try:
        for repeat in range(max(c.repeats for c in configs)):
            for cfg in configs:
                if cfg.variant in skips:
                    if repeat == 0:
                        records.append(_skipped_record(cfg, skips[cfg.variant], run_id, dist_info))
                elif repeat < cfg.repeats:
                    records.append(_one(cfg, module, ctx, repeat, run_id, dist_info, hooks))
    except ConfigError:
        raise  # a user mistake found late (e.g. missing data): no result file, one-line message
    except Exception as exc:
        if ctx.is_main:
            records.append(_error_record(cfg, exc, run_id, len(records), dist_info))
            results.write(path, records)
        raise
    if not ctx.is_main:
        return Outcome(None, records)
    return Outcome(results.write(path, records), records)


def _loaded_openmp() -> str:
    from pipelines.core import envinfo

    return envinfo.openmp_runtime()["openmp_runtime"]


def _loaded_allocator() -> str:
    from pipelines.core import envinfo

    return envinfo.allocator()["allocator"]


# (launcher knob, what it selects, what this process actually loaded)
RUNTIME_KNOBS = (("OMP_RUNTIME", "OpenMP runtime", _loaded_openmp), ("ALLOCATOR", "allocator", _loaded_allocator))


def _preflight(entry: experiments.Experiment, cfg: RunConfig, module: ModuleType, ctx) -> None:
    """Everything that can be refused before any work: device, runtime, pipeline checks, results dir."""
    import torch

    from pipelines.core import datafiles

    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NotRunnable(f"{entry.id} asks for --device cuda but no CUDA GPU is visible; "
                          "run it on a GPU machine or pass --device cpu")
    for knob, label, loaded_now in RUNTIME_KNOBS:  # launcher-owned choices: refuse a silent fallback
        wanted = os.environ.get(knob) or entry.knobs.get(knob)
        if wanted in ("gnu", "intel", "tcmalloc", "jemalloc") and (loaded := loaded_now()) != wanted:
            raise NotRunnable(f"{entry.id} needs the {wanted} {label} but {loaded} is loaded; start it "
                              f"with `make {entry.id}` or `{knob}={wanted} launch/local.sh run {entry.id}`")
    if hasattr(module, "check"):
        module.check(cfg, ctx)
    if cfg.dataset != "synthetic":
        datafiles.verify(cfg.dataset, cfg.data_root)  # missing or damaged data: refuse before any work
    if ctx.is_main:
        results.check_writable(cfg.results_dir)


def _skip_reasons(entry: experiments.Experiment, configs: list[RunConfig], module: ModuleType, ctx
                  ) -> dict[str, str]:
    """Variant -> why it cannot run on this device (from the pipeline's optional `skip`)."""
    skip = getattr(module, "skip", None)
    reasons = {cfg.variant: reason for cfg in configs if skip and (reason := skip(cfg, ctx))}
    if reasons and len(reasons) == len(configs):
        raise NotRunnable(f"{entry.id}: nothing can run here: " + "; ".join(sorted(set(reasons.values()))))
    return reasons


def _skipped_record(cfg: RunConfig, reason: str, run_id: str, dist_info) -> dict[str, Any]:
    from pipelines.core import envinfo

    return results.make_record(status="skipped", run_id=run_id, config=cfg.to_record(), repeat=0, metrics={},
                               dist=dist_info, env=envinfo.fingerprint(), notes=[reason])


def _one(cfg: RunConfig, module: ModuleType, ctx, repeat: int, run_id: str, dist_info, hooks
         ) -> dict[str, Any]:
    from pipelines.core import data, envinfo, loop, models

    seed_everything(None if cfg.seed is None else cfg.seed + repeat)
    train_tf, test_tf = module.transforms(cfg) if hasattr(module, "transforms") else (None, None)
    loaders = data.loaders(cfg, _input_shape(cfg, models), rank=ctx.rank, world_size=ctx.world_size,
                           train_transform=train_tf, test_transform=test_tf)
    notes: list[str] = []
    artifacts: dict[str, Any] = {}
    if hasattr(module, "analyze"):
        metrics, artifacts = module.analyze(cfg, ctx, loaders)
    else:
        from pipelines.core import checkpoint

        trainable = module.setup(cfg, ctx)
        metrics = loop.train(trainable, loaders, cfg, ctx, hooks=hooks or checkpoint.from_options(cfg, ctx))
        if ctx.is_main:
            metrics.update(loop.evaluate(trainable, loaders.test, cfg, ctx))
        metrics["parameters"] = models.parameter_count(trainable.model)
        notes = trainable.notes
    config = {**cfg.to_record(), "data_source": loaders.source, "train_samples": loaders.train_samples,
              "test_samples_available": loaders.test_samples}
    return results.make_record(status="ok", run_id=run_id, config=config, repeat=repeat, metrics=metrics,
                               dist=dist_info, env=envinfo.fingerprint(), artifacts=artifacts, notes=notes)


def _error_record(cfg: RunConfig, exc: Exception, run_id: str, repeat: int, dist_info) -> dict[str, Any]:
    from pipelines.core import envinfo

    return results.make_record(
        status="error", run_id=run_id, config=cfg.to_record(), repeat=repeat, metrics={},
        dist=dist_info, env=envinfo.fingerprint(),
        error={"type": exc.__class__.__name__, "message": str(exc)[:2000],
               "traceback": traceback.format_exc()[-4000:]})


def _input_shape(cfg: RunConfig, models_module) -> tuple[int, ...]:
    channels, height, width = models_module.spec(cfg.model).input_shape
    if cfg.image_size:
        height = width = cfg.image_size
    return (channels, height, width)
