"""One process of a bench-scale round: the arms of one or more plans built side by side and measured in
interleaved blocks (core/train/interleave.py), one record per arm.

Each record carries the `pairing` (the comparison's group, its round, this process) that lets the report
pair it with the other arms of the comparison (core/stats/pairing.py), and its blocks. What one shared
process cannot give one arm is said, not guessed: its memory peak (recorded only for an arm alone in its
process), and its energy (the process's joules shared out by each arm's time in it).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pipelines.core.data import datasets
from pipelines.core.errors import ConfigError
from pipelines.core.record import energy, envinfo, machine, results
from pipelines.core.harness.execute import (Outcome, data_facts, keep, pairing_mark, record_of, runner_hooks,
                                        seed_everything, unvalidated)
from pipelines.core.harness.pipeline import Preparation, TrainingPipeline, warmup_config
from pipelines.core.harness.plan import Plan
from pipelines.core.harness.refusals import skip_reasons
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train import interleave, loop, memory, models, progress
from pipelines.core.train import interrupt
from pipelines.core.train.interrupt import Interrupted, as_interrupted
@dataclass
class _Built:
    """One arm of an interleaved process, built and waiting for its blocks."""

    plan: Plan
    cfg: RunConfig
    trainable: loop.Trainable
    loaders: Any
    arm: interleave.Arm
    counter: progress.RepeatProgress


def _failed(exc: BaseException, plans, built, current, run_id: str, mark, dist_info, pairing, records, paths,
            ctx) -> None:
    """An error (no signal behind it): an error record for every arm it stopped, beside the others."""
    error = {"type": exc.__class__.__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]}
    for plan in plans:
        failed = [one.cfg for one in built if one.plan is plan] or [current]
        records[plan.experiment.id] += [record_of("error", cfg, run_id, mark["round"], dist_info, error=error,
                                                  pairing=pairing) for cfg in failed]
    if ctx.is_main:
        _keep_all(paths, records)


def run_interleaved(plans: list[Plan], ctx: loop.RunContext, dist_info: dict[str, Any],
                    shown: progress.Settings = progress.OFF) -> list[Outcome]:
    """One process of a bench-scale round: every arm of `plans` built side by side, measured in interleaved
    blocks, then evaluated; one record per arm (skipped arms too) in one file per plan. A signal leaves an
    `interrupted` record per arm, an error an `error` record per arm; nothing half-measured is kept as ok."""
    run_id = results.new_run_id()
    mark = pairing_mark(run_id)
    paths = {p.experiment.id: results.result_path(p.configs[0].results_dir, p.experiment.id, run_id) for p in plans}
    records: dict[str, list[dict[str, Any]]] = {p.experiment.id: [] for p in plans}
    built: list[_Built] = []
    labels = [f"{p.experiment.id} [{cfg.variant}]" for p in plans for cfg in p.configs]
    pairing = {**mark, "arms": labels}
    state_before, meter = machine.snapshot(ctx.device.type), energy.Meter(ctx.device.type)
    meter.start()
    current: RunConfig = plans[0].configs[0]
    try:
        with interrupt.deferred():  # a signal is acted on at the next safe point (train/interrupt.py)
            for plan in plans:
                skips = skip_reasons(plan, ctx)
                for cfg in plan.configs:
                    current = cfg
                    if cfg.variant in skips:
                        records[plan.experiment.id].append(record_of("skipped", cfg, run_id, mark["round"], dist_info,
                                                                     notes=[skips[cfg.variant]], pairing=pairing))
                        continue
                    built.append(_build(plan, cfg, ctx, mark["round"]))
            arms = [b.arm for b in built]
            first = built[0].cfg if built else current
            interleave.measure_blocks(arms, first.blocks or 1, first.block_s, first.steps)
            state = machine.judge(state_before, machine.snapshot(ctx.device.type))
            spent = meter.stop(None)
            for one in built:
                current = one.cfg
                records[one.plan.experiment.id].append(
                    _interleaved_record(one, ctx, run_id, mark["round"], dist_info, pairing, state, spent, built))
    except ConfigError:
        raise
    except (Exception, Interrupted, KeyboardInterrupt) as exc:
        if not interrupt.caused_by_signal(exc):
            _failed(exc, plans, built, current, run_id, mark, dist_info, pairing, records, paths, ctx)
            raise
        stop = as_interrupted(exc)
        interrupt.workers_are_part_of_it()
        for one in built:
            far = one.counter.how_far()
            note = f"interrupted by {stop.name} after {far['steps_done']} steps (interleaved blocks)"
            records[one.plan.experiment.id].append(results.make_record(
                status="interrupted", run_id=run_id, config=one.cfg.to_record(), repeat=mark["round"],
                metrics=far, dist=dist_info, env=envinfo.fingerprint(), notes=[note], pairing=pairing))
        kept = _keep_all(paths, records) if ctx.is_main else None
        raise Interrupted(stop.signum, kept, 0, bool(built), ctx.is_main, False) from None
    if ctx.is_main:
        _keep_all(paths, records)
    return [Outcome(paths[p.experiment.id] if records[p.experiment.id] else None, records[p.experiment.id])
            for p in plans]


def _keep_all(paths: dict[str, Path], records: dict[str, list[dict[str, Any]]]) -> Path | None:
    kept = None
    for experiment_id, recs in records.items():
        if recs:
            kept = keep(paths[experiment_id], recs)
    return kept


def _build(plan: Plan, cfg: RunConfig, ctx: loop.RunContext, round_index: int) -> _Built:
    """An arm ready for its blocks: seeded, loaders, the technique's setup and preparation, its Training."""
    seed_everything(None if cfg.seed is None else cfg.seed + round_index)
    pipeline = plan.pipeline
    transforms = pipeline.transforms(cfg) or (None, None)
    loaders = datasets.loaders(cfg, datasets.input_shape(cfg), rank=ctx.rank, world_size=ctx.world_size,
                               train_transform=transforms[0], test_transform=transforms[1])
    if not isinstance(pipeline, TrainingPipeline):
        raise ConfigError(f"{cfg.experiment} is a measurement, not a training run; it cannot be interleaved")
    trainable = pipeline.setup(cfg, ctx)
    prep = Preparation(loaders, ctx, lambda t: loop.train(t, loaders, warmup_config(cfg), ctx))
    trainable = pipeline.before_training(trainable, prep, cfg, ctx)
    label = f"{cfg.experiment} [{cfg.variant}]"
    counter = progress.RepeatProgress(label, cfg.epochs, None, progress.OFF)
    training = loop.Training(trainable, loaders, cfg, ctx, hooks=[*runner_hooks(pipeline, cfg, ctx), counter])
    arm = interleave.Arm(label, training, rng=torch.random.get_rng_state())
    return _Built(plan, cfg, trainable, loaders, arm, counter)


def _interleaved_record(one: _Built, ctx: loop.RunContext, run_id: str, round_index: int, dist_info,
                        pairing: dict[str, Any], state: dict[str, Any], spent: dict[str, Any],
                        everyone: list[_Built]) -> dict[str, Any]:
    """One arm's record: its blocks' metrics, evaluation (rank 0), the technique's metrics; memory only when
    the arm had the process to itself, energy shared out by each arm's time in the process."""
    cfg, trainable, training = one.cfg, one.trainable, one.arm.training
    alone = len(everyone) == 1
    metrics = training.finish(interleaved=not alone)
    metrics.update(block_steps=one.arm.block_steps, recompiled_blocks=one.arm.recompiles)
    notes = list(trainable.notes)
    if alone:
        metrics["variant_peak_mib"] = memory.peak_mib(ctx.device)
    else:
        notes.append(f"measured in one process with {len(everyone) - 1} other arm(s), in interleaved blocks: "
                     "its memory peak is not its own and is not recorded")
    if ctx.is_main:
        metrics.update(loop.evaluate(trainable, one.loaders.test, cfg, ctx))
    metrics["parameters"] = models.parameter_count(trainable.model)
    metrics["steps_per_epoch"] = len(one.loaders.train)
    metrics.update(trainable.metrics)
    notes += unvalidated(cfg, one.loaders, metrics)
    config = {**cfg.to_record(), **data_facts(one.loaders)}
    env = envinfo.fingerprint()
    env["python_gc_in_timed_steps"] = "paused (collected before each block)"
    return results.make_record(status="ok", run_id=run_id, config=config, repeat=round_index, metrics=metrics,
                               dist=dist_info, env=env, artifacts=trainable.artifacts, notes=notes,
                               machine=state, energy=_share_of(spent, one, everyone), pairing=pairing)


def _share_of(spent: dict[str, Any], one: _Built, everyone: list[_Built]) -> dict[str, Any]:
    """The process's joules shared out by each arm's time in it (warm-up, dropped and timed steps)."""
    if not spent.get("measured"):
        return spent
    busy = lambda b: b.arm.training.warmup_s + b.arm.training.switch_s + b.arm.training.train_s  # noqa: E731
    total = sum(busy(b) for b in everyone) or 1.0
    joules = spent["joules"] * busy(one) / total
    samples = one.arm.training.done * one.cfg.batch_size
    return {"measured": True, "joules": round(joules, 3), "joules_per_sample": round(joules / samples, 6)
            if samples else None, "shared": f"the process's {spent['joules']} J shared out by time over "
            f"{len(everyone)} arm(s)"}
