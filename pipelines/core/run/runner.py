"""Runs one catalog experiment: plan (configs) -> refusals -> repeats of every variant -> results.

`plan` resolves one RunConfig per variant (typed options included). `run` decides, from the launcher's
variables, whether this process is one rank of a distributed run (then `dist.Session` joins the group
first) and runs every variant x repeat interleaved, so slow drift of the machine hits all variants
alike: a fixed count, or with `--repeats auto` rounds until core/stats/stopping.py's rule stops them. Per
repeat it builds the loaders, then either trains (the pipeline's `setup`, its optional
`before_training`, the shared loop, evaluation on rank 0) or measures (a `Measurement`'s `measure`).
Rank 0 writes one result file, rewritten atomically after every finished repeat, so a crash, Ctrl-C or
SIGTERM loses at most the repeat in flight: a failure adds an `error` record, a signal an `interrupted`
one saying how far that repeat got (core/train/interrupt.py). Progress bars are core/train/progress.py's.
"""

from __future__ import annotations

import importlib
import os
import random
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch  # noqa: I001  (before numpy: libgomp binds this thread before OpenBLAS starts its pool,
import numpy as np  # so with GOMP_CPU_AFFINITY every thread of the process inherits a bound core)

from pipelines.core.data import datasets, files
from pipelines.core.dist import ranks
from pipelines.core.record import atomic, envinfo, results
from pipelines.core.spec import experiments, options
from pipelines.core.stats import rows, stopping
from pipelines.core.train import checkpoint, loop, memory, models, progress
from pipelines.core.spec.config import RunConfig, resolve
from pipelines.core.errors import ConfigError, DistError, NotRunnable
from pipelines.core.train.interrupt import Interrupted, as_interrupted
from pipelines.core.run.pipeline import Measurement, Pipeline, Preparation, TrainingPipeline, warmup_config


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


def run(the_plan: Plan, shown: progress.Settings = progress.OFF, announce: Callable[[], None] | None = None) -> Outcome:
    """Run the plan in this process: alone, or as the rank the launcher started (then rank 0 writes).
    `shown`: progress bars and per-epoch lines (rank 0 only; the CLI's --quiet / --verbose). `announce`:
    called on rank 0 once every refusal has passed and before any work (the CLI prints its plan there, so
    a refused run stays one line)."""
    first = the_plan.configs[0]
    place = ranks.placement()
    device = torch.device(first.device)
    for cfg in the_plan.configs:
        _refuse_before_work(the_plan, cfg, loop.RunContext(device, place.rank, place.world_size))
    _skip_reasons(the_plan, loop.RunContext(device, place.rank, place.world_size))  # nothing runnable: refused now
    if announce is not None and place.rank == 0:
        announce()
    if not place.launched:
        return _run_variants(the_plan, loop.RunContext(device), ranks.SINGLE_PROCESS, shown=shown)
    settings = dist_options(first)
    session = ranks.Session(place, settings.backend, first.device, settings.timeout_s)
    try:
        session.join()
    except DistError as exc:  # rank 0 records the failed join, torch's full text included; one line on screen
        if place.rank == 0:
            path = _write_error(the_plan, exc, ranks.describe(place, settings.backend, [session.placement_info]))
            raise DistError(f"{exc}; error record {path}") from exc
        raise
    with session:
        return _run_variants(the_plan, session.ctx, session.describe(), session, shown)


def _write_error(the_plan: Plan, exc: BaseException, dist_info: dict[str, Any]) -> Path:
    """A run that failed before any repeat: one error record, its traceback with every chained cause."""
    run_id, cfg = results.new_run_id(), the_plan.configs[0]
    record = _record("error", cfg, run_id, 0, dist_info, error={
        "type": exc.__class__.__name__, "message": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(exc))[-8000:]})
    return results.write(results.result_path(cfg.results_dir, the_plan.experiment.id, run_id), [record])


def seed_everything(seed: int | None) -> None:
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _work(configs: list[RunConfig], skips: dict[str, str], rule: stopping.AutoStop | None,
          records: list[dict[str, Any]], agree: Callable[[bool], bool]) -> Iterator[tuple[int, RunConfig]]:
    """(repeat, config) in run order; a skipped variant runs (is recorded) once, in round 0.

    Fixed repeats: every variant's repeat 0, then repeat 1, ... (ABAB). `auto` (a rule): ABBA rounds until
    the rule stops, judged on the records written so far; rank 0's decision is every rank's (`agree`)."""
    if rule is None:
        yield from [(repeat, cfg) for repeat in range(max(c.repeats for c in configs)) for cfg in configs
                    if (repeat == 0 if cfg.variant in skips else repeat < cfg.repeats)]
        return
    experiment, began = configs[0].experiment, time.monotonic()
    while agree(rule.should_start(time.monotonic() - began)):
        round_began, index = time.monotonic(), rule.rounds
        yield from [(index, cfg) for cfg in stopping.order(configs, index)
                    if not (index and cfg.variant in skips)]
        rule.after_round(rows.arm_halfwidths(records, [experiment]), time.monotonic() - round_began)


def _stop_rule(configs: list[RunConfig]) -> stopping.AutoStop | None:
    first = configs[0]
    return stopping.AutoStop(first.budget_s, max_rounds=first.repeats) if first.repeats_auto else None


def _agreement(session) -> Callable[[bool], bool]:
    """Rank 0's decision, on every rank (all ranks must run the same repeats, or a collective hangs)."""
    return (lambda mine: mine) if session is None else (lambda mine: bool(ranks.gather_objects(mine)[0]))


def _with_stopping(records: list[dict[str, Any]], rule: stopping.AutoStop | None) -> list[dict[str, Any]]:
    """Every record of an `auto` run says which rule stopped it, the rounds and the half-widths then."""
    if rule is not None:
        for record in records:
            record["stopping"] = rule.summary()
    return records


def _run_variants(the_plan: Plan, ctx: loop.RunContext, dist_info: dict[str, Any], session=None,
                  shown: progress.Settings = progress.OFF) -> Outcome:
    """Every variant x repeat, interleaved (ABAB..., or ABBA rounds with --repeats auto), the result file
    rewritten after each; an error writes an error record, a signal an interrupted record for the repeat
    in flight, then each re-raises."""
    configs = the_plan.configs
    skips = _skip_reasons(the_plan, ctx)
    run_id = results.new_run_id()
    path = results.result_path(configs[0].results_dir, the_plan.experiment.id, run_id)
    records: list[dict[str, Any]] = []
    rule = _stop_rule(configs)
    work = _work(configs, skips, rule, records, _agreement(session))
    planned = None if rule else sum(1 if c.variant in skips else c.repeats for c in configs)
    bars = progress.RunProgress(the_plan.experiment.id, planned, shown if ctx.is_main else progress.OFF,
                                rule=rule)
    cfg, repeat, in_flight = configs[0], 0, None
    try:
        for repeat, cfg in work:
            if cfg.variant in skips:
                record = _record("skipped", cfg, run_id, 0, dist_info, notes=[skips[cfg.variant]])
            else:
                budget = cfg.warmup_steps + cfg.steps if cfg.steps else None  # None: whole epochs
                in_flight = bars.repeat(f"{cfg.experiment} [{cfg.variant}] #{repeat}", cfg.epochs, budget)
                record = _run_repeat(the_plan.pipeline, cfg, ctx, repeat, run_id, dist_info, in_flight)
            records.append(record)
            in_flight = None
            if ctx.is_main:
                results.write(path, records)  # each finished repeat is on disk before the next starts
            bars.finished(record)
        if ctx.is_main and rule is not None:
            results.write(path, _with_stopping(records, rule))
    except ConfigError:
        raise  # a user mistake found late (e.g. missing data): one-line message
    except (Interrupted, KeyboardInterrupt) as exc:
        stop, finished = as_interrupted(exc), len(records)
        if in_flight is not None:
            in_flight.close()
            records.append(_interrupted(cfg, run_id, repeat, dist_info, stop, in_flight))
        if rule is not None:
            rule.stopped_by = "interrupted"
        kept = results.write(path, _with_stopping(records, rule)) if ctx.is_main and records else None
        raise Interrupted(stop.signum, kept, finished, in_flight is not None, ctx.is_main,
                          session is not None) from None
    except Exception as exc:
        error = _record("error", cfg, run_id, len(records), dist_info, error={
            "type": exc.__class__.__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]})
        if ctx.is_main:
            results.write(path, [*records, error])
        if session is not None:
            session.abort(exc, path if ctx.is_main else None)  # a broken group: one line, no teardown
        raise
    finally:
        bars.close()
    launched = session is not None
    if not ctx.is_main:
        return Outcome(None, records, launched)
    return Outcome(path if records else None, records, launched)


def _interrupted(cfg: RunConfig, run_id: str, repeat: int, dist_info, stop: Interrupted,
                 how: progress.RepeatProgress) -> dict[str, Any]:
    """The record of the repeat a signal stopped: how far it got, never a measurement to compare."""
    far = how.how_far()
    steps_of = f" of {far['steps_planned']}" if far["steps_planned"] else ""
    epochs = f", {far['epochs_done']} of {far['epochs_planned']} epochs" if far["epochs_planned"] else ""
    note = f"interrupted by {stop.name} after {far['steps_done']}{steps_of} steps{epochs}"
    return results.make_record(status="interrupted", run_id=run_id, config=cfg.to_record(), repeat=repeat,
                               metrics=far, dist=dist_info, env=envinfo.fingerprint(), notes=[note])


# (launcher knob, what it selects, what this process actually loaded)
RUNTIME_KNOBS = (("OMP_RUNTIME", "OpenMP runtime", lambda: envinfo.openmp_runtime()["openmp_runtime"]),
                 ("ALLOCATOR", "allocator", lambda: envinfo.allocator()["allocator"]))


def preflight(the_plan: Plan, world_size: int, rank: int, capabilities: bool = True) -> float:
    """A launcher's check before it starts any process (`accel preflight`): each rank's refusals, for the
    world it is about to start; returns the run's rendezvous wait (timeout_s) the launcher passes on.

    Without `capabilities` (the ranks run inside IMAGE, whose libraries this host may lack) only user
    mistakes are refused: what the device, runtime and backend can do is for the ranks to say."""
    ctx = loop.RunContext(torch.device(the_plan.configs[0].device), rank, world_size)
    for cfg in the_plan.configs:
        _refuse_before_work(the_plan, cfg, ctx, capabilities)
    if capabilities:
        _skip_reasons(the_plan, ctx)
    return dist_options(the_plan.configs[0]).timeout_s


def _refuse_before_work(the_plan: Plan, cfg: RunConfig, ctx: loop.RunContext, capabilities: bool = True) -> None:
    """Everything that can be refused before any work: device, runtime, backend, pipeline checks, data, results."""
    if capabilities:
        _refuse_capabilities(the_plan, cfg)
    try:
        the_plan.pipeline.check(cfg, cfg.options, ctx)
    except NotRunnable:
        if capabilities:
            raise
    datasets.check(cfg)
    if cfg.dataset != "synthetic":
        files.verify(cfg.dataset, cfg.data_root)  # missing or damaged data: refuse before any work
    if cfg.weights is not None and not (Path(cfg.weights).is_dir() and models.spec(cfg.model).from_folder):
        models.read_state_dict(cfg.weights)  # a file of tensors (a folder model reads its folder in setup)
    if ctx.is_main:
        results.check_writable(cfg.results_dir)
        if isinstance(cfg.options, options.CheckpointOptions) and cfg.options.checkpoint_dir:
            atomic.check_folder(Path(cfg.options.checkpoint_dir), "checkpoint_dir",
                                "pass -o checkpoint_dir= with a writable folder")


def _refuse_capabilities(the_plan: Plan, cfg: RunConfig) -> None:
    """What this machine cannot do for the run: a GPU, the OpenMP runtime or allocator, the backend."""
    experiment = the_plan.experiment
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NotRunnable(f"{experiment.id} asks for --device cuda but no CUDA GPU is visible; run it on a GPU "
                          "machine, or smoke-test its code path on CPU: accel run "
                          f"{experiment.id} {' '.join(experiments.cpu_smoke_args(experiment))}")
    for knob, label, loaded_now in RUNTIME_KNOBS:  # launcher-owned choices: refuse a silent fallback
        wanted = os.environ.get(knob) or experiment.knobs.get(knob)
        if wanted in ("gnu", "intel", "tcmalloc", "jemalloc") and (loaded := loaded_now()) != wanted:
            raise NotRunnable(f"{experiment.id} needs the {wanted} {label} but {loaded} is loaded; start it "
                              f"with `accel launch {experiment.id} ...` (what `make {experiment.id}` runs) or "
                              f"`{knob}={wanted} launch/local.sh run {experiment.id} ...`")
    if isinstance(cfg.options, options.DistOptions):
        ranks.check_backend(cfg.options.backend, cfg.device)


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
                dist_info, counter: progress.RepeatProgress) -> dict[str, Any]:
    seed_everything(None if cfg.seed is None else cfg.seed + repeat)
    transforms = pipeline.transforms(cfg, cfg.options) or (None, None)
    loaders = datasets.loaders(cfg, datasets.input_shape(cfg), rank=ctx.rank, world_size=ctx.world_size,
                           train_transform=transforms[0], test_transform=transforms[1])
    if isinstance(pipeline, Measurement):
        measured = pipeline.measure(cfg, cfg.options, ctx, loaders)
        metrics, artifacts, notes = measured.metrics, measured.artifacts, []
    else:
        metrics, notes, artifacts = _train(pipeline, cfg, ctx, loaders, counter)
    config = {**cfg.to_record(), "data_source": loaders.source, "train_samples": loaders.train_samples,
              "test_samples_available": loaders.test_samples, **loaders.details}
    return results.make_record(status="ok", run_id=run_id, config=config, repeat=repeat, metrics=metrics,
                               dist=dist_info, env=envinfo.fingerprint(), artifacts=artifacts, notes=notes)


def _train(pipeline: TrainingPipeline, cfg: RunConfig, ctx: loop.RunContext, loaders,
           counter: progress.RepeatProgress) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """setup -> before_training -> the timed loop -> evaluation (rank 0); the technique's metrics added."""
    trainable = pipeline.setup(cfg, cfg.options, ctx)
    prep = Preparation(loaders, ctx, lambda t: loop.train(t, loaders, warmup_config(cfg), ctx))
    trainable = pipeline.before_training(trainable, prep, cfg, cfg.options, ctx)
    memory.reset_peak(ctx.device)
    metrics = loop.train(trainable, loaders, cfg, ctx, hooks=[*_runner_hooks(cfg, ctx), counter])
    metrics["variant_peak_mib"] = memory.peak_mib(ctx.device)  # this variant's training alone
    if (reserved := memory.peak_reserved_mib(ctx.device)) is not None:
        metrics["variant_peak_reserved_mib"] = reserved  # the talk's figure: the allocator's reserved peak
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
                                       ranks.barrier_if_initialized)]
