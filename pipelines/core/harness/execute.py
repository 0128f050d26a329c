"""Execution: every variant x repeat of a plan in the order the repeat rule gives, each repeat's record
written before the next starts. (Bench scale's processes of a round measure their arms in interleaved blocks
instead: harness/interleaved.py.)

Fixed repeats run ABAB...; `--repeats auto` runs ABBA rounds until core/stats/stopping.py's rule stops
them (rank 0 decides for every rank). A repeat builds its loaders, then trains (the pipeline's `setup`,
its optional `before_training`, the shared loop, evaluation on rank 0) or measures (a Measurement).
Rank 0 rewrites one result file atomically after every finished repeat, so a crash, Ctrl-C or SIGTERM
loses at most the repeat in flight: a failure adds an `error` record, a signal an `interrupted` one
saying how far that repeat got (core/train/interrupt.py).
"""

from __future__ import annotations

import os
import random
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch  # noqa: I001  (before numpy: libgomp binds this thread before OpenBLAS starts its pool,
import numpy as np  # so with GOMP_CPU_AFFINITY every thread of the process inherits a bound core)

from pipelines.core.data import datasets
from pipelines.core.distributed import ranks
from pipelines.core.errors import ConfigError
from pipelines.core.record import energy, envinfo, history, machine, results
from pipelines.core.harness.pipeline import Measurement, Pipeline, Preparation, TrainingPipeline, warmup_config
from pipelines.core.harness.plan import Plan
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.stats import rows, stopping
from pipelines.core.train import checkpoint, loop, memory, models, progress
from pipelines.core.train import interrupt
from pipelines.core.train.interrupt import Interrupted, as_interrupted


@dataclass
class Outcome:
    path: Path | None
    records: list[dict[str, Any]]
    launched: bool = False  # one rank of a distributed run


def seed_everything(seed: int | None) -> None:
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def work_order(configs: list[RunConfig], skips: dict[str, str], rule: stopping.AutoStop | None,
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


ALTERNATION_ENV = "ACCEL_ALTERNATION"  # "group:round:slot", set by the comparison that started this process


def pairing_mark(run_id: str, env=None) -> dict[str, Any]:
    """Which comparison, round and process this process is (its records carry it as `pairing`); a process
    started by hand is a comparison of its own, round 0."""
    env = os.environ if env is None else env
    mark = env.get(ALTERNATION_ENV, "")
    group, _, rest = mark.partition(":")
    round_text, _, slot = rest.partition(":")
    if not group or not round_text.isdigit():
        return {"group": run_id, "round": 0, "process": run_id}
    return {"group": group, "round": int(round_text), "process": mark if slot else f"{mark}:{run_id}"}


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


def run_variants(the_plan: Plan, ctx: loop.RunContext, dist_info: dict[str, Any], skips: dict[str, str],
                 session=None, shown: progress.Settings = progress.OFF) -> Outcome:
    """Every variant x repeat, interleaved (ABAB..., or ABBA rounds with --repeats auto), the result file
    rewritten after each; an error writes an error record, a signal an interrupted record for the repeat
    in flight, then each re-raises. `skips`: the arms this device cannot run (refusals.skip_reasons, asked
    once by the runner before any work), recorded as skipped."""
    configs = the_plan.configs
    run_id = results.new_run_id()
    mark = pairing_mark(run_id)
    path = results.result_path(configs[0].results_dir, the_plan.experiment.id, run_id)
    records: list[dict[str, Any]] = []
    rule = _stop_rule(configs)
    work = work_order(configs, skips, rule, records, _agreement(session))
    planned = None if rule else sum(1 if c.variant in skips else c.repeats for c in configs)
    bars = progress.RunProgress(the_plan.experiment.id, planned, shown if ctx.is_main else progress.OFF,
                                rule=rule)
    cfg, repeat, in_flight = configs[0], 0, None
    try:
        with interrupt.deferred():  # a signal is acted on at the next safe point (train/interrupt.py)
            for repeat, cfg in work:
                interrupt.check()  # a safe point: between repeats
                if cfg.variant in skips:
                    record = record_of("skipped", cfg, run_id, 0, dist_info, notes=[skips[cfg.variant]])
                else:
                    budget = cfg.warmup_steps + cfg.steps if cfg.steps else None  # None: whole epochs
                    in_flight = bars.repeat(f"{cfg.experiment} [{cfg.variant}] #{repeat}", cfg.epochs, budget)
                    record = _run_repeat(the_plan.pipeline, cfg, ctx, repeat, run_id, dist_info, in_flight)
                    record["pairing"] = {**mark, "round": mark["round"] + repeat}  # repeats pair by round
                records.append(record)
                in_flight = None
                if ctx.is_main:
                    keep(path, records)  # each finished repeat is on disk before the next starts
                bars.finished(record)
            if ctx.is_main and rule is not None:
                keep(path, _with_stopping(records, rule))
    except ConfigError:
        raise  # a user mistake found late (e.g. missing data): one-line message
    except (Exception, Interrupted, KeyboardInterrupt) as exc:
        if not interrupt.caused_by_signal(exc):
            _failed(exc, cfg, run_id, records, dist_info, ctx, path, session)
            raise
        stop, finished = as_interrupted(exc), len(records)
        interrupt.workers_are_part_of_it()
        if in_flight is not None:
            in_flight.close()
            records.append(_interrupted(cfg, run_id, repeat, dist_info, stop, in_flight))
        if rule is not None:
            rule.stopped_by = "interrupted"
        kept = keep(path, _with_stopping(records, rule)) if ctx.is_main and records else None
        raise Interrupted(stop.signum, kept, finished, in_flight is not None, ctx.is_main,
                          session is not None) from None
    finally:
        bars.close()
    launched = session is not None
    if not ctx.is_main:
        return Outcome(None, records, launched)
    return Outcome(path if records else None, records, launched)


def _failed(exc: BaseException, cfg: RunConfig, run_id: str, records: list[dict[str, Any]], dist_info,
            ctx: loop.RunContext, path: Path, session) -> None:
    """An error (no signal behind it): its record beside the finished ones, then the group is left."""
    error = record_of("error", cfg, run_id, len(records), dist_info, error={
        "type": exc.__class__.__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]})
    if ctx.is_main:
        keep(path, [*records, error])
    if session is not None:
        session.abort(exc, path if ctx.is_main else None)  # a broken group: one line, no teardown


def _interrupted(cfg: RunConfig, run_id: str, repeat: int, dist_info, stop: Interrupted,
                 how: progress.RepeatProgress) -> dict[str, Any]:
    """The record of the repeat a signal stopped: how far it got, never a measurement to compare."""
    far = how.how_far()
    steps_of = f" of {far['steps_planned']}" if far["steps_planned"] else ""
    epochs = f", {far['epochs_done']} of {far['epochs_planned']} epochs" if far["epochs_planned"] else ""
    note = f"interrupted by {stop.name} after {far['steps_done']}{steps_of} steps{epochs}"
    return results.make_record(status="interrupted", run_id=run_id, config=cfg.to_record(), repeat=repeat,
                               metrics=far, dist=dist_info, env=envinfo.fingerprint(), notes=[note])


def record_of(status: str, cfg: RunConfig, run_id: str, repeat: int, dist_info, **extra) -> dict[str, Any]:
    """A record without measurements (skipped, error); `extra` carries its error, notes or pairing."""
    return results.make_record(status=status, run_id=run_id, config=cfg.to_record(), repeat=repeat, metrics={},
                               dist=dist_info, env=envinfo.fingerprint(), **extra)


def keep(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write the run's records (the source of truth), then index them in the folder's history store
    (record/history.py). A store that cannot be updated costs one warning, never the records."""
    import sqlite3

    written = results.write(path, records)
    try:
        history.add(path.parent, records, path)
    except sqlite3.Error as exc:
        print(f"accel: warning: the history store {history.store_path(path.parent)} was not updated ({exc}); "
              "`accel history ID --rebuild` makes it again from the records", file=sys.stderr)
    return written


def _run_repeat(pipeline: Pipeline, cfg: RunConfig, ctx: loop.RunContext, repeat: int, run_id: str,
                dist_info, counter: progress.RepeatProgress) -> dict[str, Any]:
    seed_everything(None if cfg.seed is None else cfg.seed + repeat)
    state_before, meter = machine.snapshot(ctx.device.type), energy.Meter(ctx.device.type)
    meter.start()
    transforms = pipeline.transforms(cfg) or (None, None)
    loaders = datasets.loaders(cfg, datasets.input_shape(cfg), rank=ctx.rank, world_size=ctx.world_size,
                           train_transform=transforms[0], test_transform=transforms[1])
    if isinstance(pipeline, Measurement):
        measured = pipeline.measure(cfg, ctx, loaders)
        metrics, artifacts = measured.metrics, measured.artifacts
        notes = unvalidated(cfg, loaders, metrics)
    else:
        metrics, notes, artifacts = _train(pipeline, cfg, ctx, loaders, counter)
    config = {**cfg.to_record(), **data_facts(loaders)}
    trained = (metrics.get("samples_per_step") or 0) * ((metrics.get("warmup_steps") or 0)
                                                         + (metrics.get("measured_steps") or 0))
    return results.make_record(status="ok", run_id=run_id, config=config, repeat=repeat, metrics=metrics,
                               dist=dist_info, env=envinfo.fingerprint(), artifacts=artifacts, notes=notes,
                               machine=machine.judge(state_before, machine.snapshot(ctx.device.type)),
                               energy=meter.stop(trained or None))


def _train(pipeline: TrainingPipeline, cfg: RunConfig, ctx: loop.RunContext, loaders,
           counter: progress.RepeatProgress) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """setup -> before_training -> the timed loop -> evaluation (rank 0); the technique's metrics added."""
    trainable = pipeline.setup(cfg, ctx)
    prep = Preparation(loaders, ctx, lambda t: loop.train(t, loaders, warmup_config(cfg), ctx))
    trainable = pipeline.before_training(trainable, prep, cfg, ctx)
    memory.reset_peak(ctx.device)
    metrics = loop.train(trainable, loaders, cfg, ctx, hooks=[*runner_hooks(pipeline, cfg, ctx), counter],
                         pause_collector=cfg.scale != "book")
    metrics["variant_peak_mib"] = memory.peak_mib(ctx.device)  # this variant's training alone
    if (reserved := memory.peak_reserved_mib(ctx.device)) is not None:
        metrics["variant_peak_reserved_mib"] = reserved  # the talk's figure: the allocator's reserved peak
    if ctx.is_main:
        metrics.update(loop.evaluate(trainable, loaders.test, cfg, ctx))
    metrics["parameters"] = models.parameter_count(trainable.model)
    metrics["steps_per_epoch"] = len(loaders.train)  # this rank's batches an epoch: the split, batch and ranks
    metrics.update(trainable.metrics)
    notes = [*trainable.notes, *unvalidated(cfg, loaders, metrics)]
    if cfg.pin_memory and ctx.device.type != "cuda":
        notes.append("pin_memory=True has no effect without a GPU: page-locked buffers only speed "
                      "host-to-GPU copies")
    return metrics, notes, trainable.artifacts


def data_facts(loaders: datasets.Loaders) -> dict[str, Any]:
    """What the record's config says about the data a run trained on: its source, the split's sizes, the
    tokenizer."""
    facts = {"data_source": loaders.source, "train_samples": loaders.train_samples,
             "test_samples_available": loaders.test_samples, **loaders.details}
    if loaders.valid is not None:
        facts["validation_samples_available"] = loaders.valid_samples
    return facts


def unvalidated(cfg: RunConfig, loaders: datasets.Loaders, metrics: dict[str, Any]) -> list[str]:
    """A note when the split held out a validation part that no validation pass used (never silent)."""
    if loaders.valid is None or "validation_passes" in metrics:
        return []
    return [f"split {cfg.split} holds out {loaders.valid_samples} validation samples; this run made no "
            "validation pass (this pipeline has none, or -o validate=false)"]


def runner_hooks(pipeline, cfg: RunConfig, ctx: loop.RunContext) -> list[loop.Hooks]:
    """Checkpoints, for pipelines that declare them (Supports.checkpoints) when the run names a folder."""
    opts = cfg.options
    if not pipeline.supports.checkpoints or not opts.checkpoint_dir:
        return []
    return [checkpoint.CheckpointHooks(Path(opts.checkpoint_dir), opts.checkpoint_every, ctx.is_main,
                                       ranks.barrier_if_initialized)]
