"""The engine: how every process measures, at every scale (smoke, bench, book), alone or as one rank of a
launch, with one record builder (harness/recording.py), one failure path and one interrupt path.

A process measures *units*. The arms of a unit are built side by side: seeded (the run's seed + the repeat,
every generator), their loaders, the technique's `setup` and `before_training`, a Training (train/loop.py)
with the runner's hooks. They are built, and warmed up, in the unit's order in even repeats and in the
reverse order in odd ones (stats/orders.py: abba), so whatever the order of building leaves behind (where
each arm's tensors landed, which arm filled a cache first) favours no arm over the processes. Then the
unit is measured by its *protocol*, which every record names:

- `blocks` (bench scale, training): every arm warms up, then `blocks` cycles (whole periods of a carry-over
  balanced order, rotated by the round: stats/orders.py), each block about `block_s` seconds of that arm's
  steps, the first step after a switch dropped,
  Python's collector paused inside each block (train/interleave.py). A lone arm (one rank of a launch, an
  arm with a process environment of its own) runs its blocks back to back with nothing dropped; the ranks
  of a launch take rank 0's block sizes, so every rank runs the same steps.
- `window` (smoke and book scale): warm-up, then one timed window of the steps or the epochs. A measurement
  (a profile, a search) measures itself.

Torch's process-wide settings (matmul precision, intra-op threads, backend flags) are the unit's: the engine
applies the pipeline's declared `process_options` before the unit is built, gives every arm a fresh compiler,
and puts the process's state back after the unit (train/torch_state.py), so no arm inherits another's.

At bench scale one unit a repeat holds every arm of the process; at smoke and book scale each arm is a unit
of its own (the book ran its variants one after the other). Repeats: a fixed count (ABAB) or `auto` (ABBA:
every arm's next repeat, in turn, until core/stats/stopping.py's rule stops them; rank 0 decides for every
rank). Rank 0 rewrites one
result file per plan atomically after every unit, so a crash, Ctrl-C or SIGTERM loses at most the unit in
flight: a failure adds an `error` record for each of its arms, a signal an `interrupted` one saying how far
each got (core/train/interrupt.py).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch  # noqa: F401, I001  (first: libgomp binds this thread before numpy's OpenBLAS starts its pool,
# so with GOMP_CPU_AFFINITY every thread of the process inherits a bound core; harness/arms.py imports numpy)
from pipelines.core.config.request import Pairing
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.distributed import collectives
from pipelines.core.errors import ConfigError
from pipelines.core.harness import recording
from pipelines.core.config.arm import Arm
from pipelines.core.harness.arms import Built, build, loaders_for, seed_everything
from pipelines.core.harness.pipeline import Measurement, TrainingPipeline
from pipelines.core.harness.plan import Plan
from pipelines.core.record import card, energy, machine, results
from pipelines.core.stats import orders, rows, stopping
from pipelines.core.train import interleave, interrupt, loop, memory, profiler, progress, resume, torch_state
from pipelines.core.train.interrupt import Interrupted, as_interrupted

@dataclass
class Outcome:
    path: Path | None
    records: list[dict[str, Any]]
    launched: bool = False  # one rank of a distributed run


def protocol_of(plans: list[Plan]) -> str:
    training = all(isinstance(p.pipeline, TrainingPipeline) for p in plans)
    return "blocks" if training and plans[0].configs[0].scale == "bench" else "window"


def work_order(configs: list[RunConfig], skips: Mapping[Arm, str], rule: stopping.AutoStop | None,
               records: list[dict[str, Any]], agree: Callable[[bool], bool],
               together: bool = False) -> Iterator[tuple[int, list[RunConfig]]]:
    """(repeat, the unit's configs) in run order; a skipped arm runs (is recorded) once, in repeat 0.
    `together`: a repeat's arms are one unit (blocks), else one unit each.

    Fixed repeats: every arm's repeat 0, then repeat 1, ... (ABAB). `auto` (a rule): every arm's next repeat,
    in ABBA order, until the rule stops, judged on the records written so far; rank 0's decision is every
    rank's (`agree`)."""
    def units(repeat: int, cfgs: list[RunConfig]) -> list[tuple[int, list[RunConfig]]]:
        if not cfgs:
            return []
        return [(repeat, cfgs)] if together else [(repeat, [cfg]) for cfg in cfgs]

    if rule is None:
        for repeat in range(max(c.repeats for c in configs)):
            yield from units(repeat, [c for c in configs if (repeat == 0 if c.arm in skips else repeat < c.repeats)])
        return
    experiments, began = list(dict.fromkeys(c.experiment for c in configs)), time.monotonic()
    while agree(rule.should_start(time.monotonic() - began)):
        began_repeat, repeat = time.monotonic(), rule.rounds
        yield from units(repeat, [c for c in orders.abba(configs, repeat) if not (repeat and c.arm in skips)])
        rule.after_round(rows.arm_halfwidths(records, experiments), time.monotonic() - began_repeat)


def rank_zeros(session) -> Callable[[Any], Any]:
    """Rank 0's value on every rank of the session (all ranks must run the same repeats and block sizes, or
    a collective hangs); this process's own value without one."""
    return (lambda mine: mine) if session is None else (lambda mine: collectives.gather_objects(mine)[0])


def _stop_rule(configs: list[RunConfig]) -> stopping.AutoStop | None:
    first = configs[0]
    return stopping.AutoStop(first.budget_s, max_rounds=first.repeats) if first.auto else None


def run_plans(plans: list[Plan], ctx: loop.RunContext, dist_info: dict[str, Any], skips: Mapping[Arm, str], *,
              run_id: str | None = None, pairing: Pairing | None = None, session=None,
              shown: progress.Settings = progress.OFF) -> list[Outcome]:
    """Every arm of `plans` x its repeats, in units by the protocol (module docstring), a result file per plan
    rewritten after each unit. `skips`: the arms this device cannot run (refusals.skip_reasons, asked once by
    the runner), recorded as skipped. `run_id` and `pairing`: a worker's request's (config/request.py); a new
    run id and a comparison of its own otherwise."""
    configs = [cfg for p in plans for cfg in p.configs]
    plan_of = {cfg.arm: p for p in plans for cfg in p.configs}
    run_id = run_id or results.new_run_id()
    mark = recording.pairing_mark(run_id, pairing)
    paths = {p.experiment.id: results.result_path(p.configs[0].results_dir, p.experiment.id, run_id) for p in plans}
    records: dict[str, list[dict[str, Any]]] = {p.experiment.id: [] for p in plans}
    everything: list[dict[str, Any]] = []  # what the stop rule judges
    protocol = protocol_of(plans)
    rule = _stop_rule(configs)
    work = work_order(configs, skips, rule, everything, rank_zeros(session), together=protocol == "blocks")
    planned = None if rule else sum(1 if c.arm in skips else c.repeats for c in configs)
    bars = progress.RunProgress(" + ".join(paths), planned, shown if ctx.is_main else progress.OFF, rule=rule)
    repeat, unit, counters, built = 0, [configs[0]], {}, []

    def add(record: dict[str, Any]) -> None:
        records[record["experiment"]].append(record)
        everything.append(record)
        bars.finished(record)

    def keep_all(with_stopping: bool = False) -> Path | None:
        kept = None
        for experiment_id, recs in records.items():
            if recs and ctx.is_main:
                if with_stopping and rule is not None:
                    for record in recs:
                        record["stopping"] = rule.as_record()
                kept = recording.keep(paths[experiment_id], recs)
        return kept

    try:
        with interrupt.deferred():  # a signal is acted on at the next safe point (train/interrupt.py)
            for repeat, unit in work:
                interrupt.check()  # a safe point: between units
                round_mark = {**mark, "round": mark["round"] + repeat}
                if protocol == "blocks":
                    round_mark["arms"] = [str(c.arm) for c in configs]
                counters = {c.arm: _counter(bars, c, len(unit)) for c in unit if c.arm not in skips}
                for cfg in unit:
                    if cfg.arm in skips:
                        add(recording.record_of("skipped", cfg, run_id, mark["round"] + repeat, dist_info,
                                                notes=[skips[cfg.arm]], pairing=round_mark))
                for record in _measure_unit([(plan_of[c.arm], c) for c in unit if c.arm in counters], ctx,
                                            session, protocol, counters, built, run_id, mark["round"] + repeat,
                                            dist_info, round_mark):
                    add(record)
                unit, counters, built = [], {}, []
                keep_all()  # each finished unit is on disk before the next starts
            if rule is not None:  # every record of an `auto` run says which rule stopped it
                keep_all(with_stopping=True)
    except ConfigError:
        raise  # a user mistake found late (e.g. missing data): one-line message
    except (Exception, Interrupted, KeyboardInterrupt) as exc:
        for hook in (h for arm in built for h in arm.training.hooks if isinstance(h, resume.CheckpointHooks)):
            hook.leave_position()  # for the resume's account of what was lost
        in_flight = [c for c in unit if c.arm in counters]
        round_mark = {**mark, "round": mark["round"] + repeat}
        if not interrupt.caused_by_signal(exc):
            error = {"type": exc.__class__.__name__, "message": str(exc)[:2000],
                     "traceback": traceback.format_exc()[-4000:]}
            for cfg in in_flight or unit:
                add(recording.record_of("error", cfg, run_id, mark["round"] + repeat, dist_info, error=error,
                                        pairing=round_mark))
            kept = keep_all()
            if session is not None:
                session.abort(exc, kept)  # a broken group: one line, no teardown
            raise
        stop, finished = as_interrupted(exc), sum(r["status"] == "ok" for r in everything)
        interrupt.workers_are_part_of_it()
        for cfg in in_flight:
            counters[cfg.arm].close()
            add(recording.interrupted(cfg, run_id, mark["round"] + repeat, dist_info, stop.name, counters[cfg.arm],
                                      pairing=round_mark))
        if rule is not None:
            rule.stopped_by = "interrupted"
        kept = keep_all(with_stopping=True)
        if stop.checkpoint and session is not None:  # every rank stopped after the same save for a requeue:
            collectives.barrier_if_initialized()  # none leaves before rank 0 kept its record (cli/main.py)
        raise Interrupted(stop.signum, kept, finished, bool(in_flight), ctx.is_main, session is not None,
                          stop.checkpoint) from None
    finally:
        bars.close()
    launched = session is not None
    return [Outcome(paths[p.experiment.id] if records[p.experiment.id] and ctx.is_main else None,
                    records[p.experiment.id], launched) for p in plans]


def _counter(bars: progress.RunProgress, cfg: RunConfig, arms: int) -> progress.RepeatProgress:
    """An arm's step counter: the run's bars draw it when the arm is its unit's only one."""
    if arms > 1:
        return progress.RepeatProgress(str(cfg.arm), cfg.epochs, None, progress.OFF)
    budget = cfg.warmup_steps + cfg.steps if cfg.steps and cfg.scale != "bench" else None  # None: epochs/blocks
    return bars.repeat(str(cfg.arm), cfg.epochs, budget)


def _measure_unit(unit: list[tuple[Plan, RunConfig]], ctx: loop.RunContext, session, protocol: str,
                  counters: dict[Arm, progress.RepeatProgress], built: list[Built], run_id: str, repeat: int,
                  dist_info, pairing: dict[str, Any]) -> list[dict[str, Any]]:
    """Build the unit's arms side by side (into `built`, which the caller's failure and interrupt paths read),
    measure them by the protocol, and return one record per arm."""
    if not unit:
        return []
    the_plan, cfg = unit[0]  # a unit's arms share their process options (harness/sharing.py)
    with torch_state.settings(the_plan.pipeline.process_values(cfg)):
        return _measured_unit(unit, ctx, session, protocol, counters, built, run_id, repeat, dist_info, pairing)


def build_unit(unit: list[tuple[Plan, RunConfig]], ctx: loop.RunContext, repeat: int,
               counters: dict[Arm, progress.RepeatProgress], built: list[Built], run_id: str = "") -> None:
    """Build the unit's arms into `built`: in the unit's order in even repeats and reversed in odd ones, so each
    arm is built before each other arm in half the processes; `built` ends in the unit's order, which the
    period's labels follow (stats/orders.py)."""
    for the_plan, cfg in orders.abba(unit, repeat):
        built.append(build(the_plan, cfg, ctx, repeat, counters[cfg.arm], run_id))
    built[:] = orders.abba(built, repeat)


def _step_profile(one: Built) -> dict[str, Any]:
    """The arm's step profile (train/profiler.py), taken in every round after its timed blocks (a prediction
    takes the median over rounds); a profile that fails is recorded as such and costs the arm nothing else."""
    try:
        return profiler.profile_one_step(one.training)
    except Exception as exc:  # noqa: BLE001  (an extra reading: the measurement above stands without it)
        return {"error": f"{type(exc).__name__}: {exc}"}


def _measured_unit(unit: list[tuple[Plan, RunConfig]], ctx: loop.RunContext, session, protocol: str,
                   counters: dict[Arm, progress.RepeatProgress], built: list[Built], run_id: str, repeat: int,
                   dist_info, pairing: dict[str, Any]) -> list[dict[str, Any]]:
    the_plan, cfg = unit[0]
    process_card = card.for_process(cfg.scale)  # measured once a process, before any arm is built
    state_before, meter = machine.snapshot(ctx.device.type), energy.Meter(ctx.device.type)
    meter.start()
    if isinstance(the_plan.pipeline, Measurement):  # measures itself: a profile, a search
        seed_everything(None if cfg.seed is None else cfg.seed + repeat)
        loaders = loaders_for(the_plan, cfg, ctx)
        torch_state.fresh_compiler()
        done = the_plan.pipeline.measure(cfg, ctx, loaders)
        state = machine.judge(state_before, machine.snapshot(ctx.device.type))
        return [recording.measurement(cfg, done, loaders, run_id, repeat, dist_info, machine=state,
                                      energy=meter.stop(recording.samples_trained(done.metrics) or None),
                                      pairing=pairing, card=process_card)]
    build_unit(unit, ctx, repeat, counters, built, run_id)
    memory.reset_peak(ctx.device)  # each arm's training, not its loaders' and models' building
    alone = len(built) == 1
    if protocol == "blocks":
        first = built[0].cfg
        interleave.measure_blocks([b.training for b in built], first.blocks or 1, first.block_s, first.steps,
                                  agree=rank_zeros(session), rotation=repeat)
        profiles = {b.cfg.arm: _step_profile(b) for b in built}
        measured = {b.cfg.arm: b.training.finish(shared=not alone) for b in built}
        for arm, found in profiles.items():
            measured[arm]["step_profile"] = found
    else:
        one = built[0]
        measured = {one.cfg.arm: one.training.train(pause_collector=one.cfg.scale != "book")}
    state = machine.judge(state_before, machine.snapshot(ctx.device.type))
    trained = sum(b.training.samples * ctx.world_size for b in built)
    spent = meter.stop(trained or None)
    busy = {b.cfg.arm: b.training.warmup_s + b.training.switch_s + b.training.train_s for b in built}
    out = []
    for b in built:
        metrics = measured[b.cfg.arm]
        notes: list[str] = []
        if alone:
            metrics["variant_peak_mib"] = memory.peak_mib(ctx.device)  # this arm's training alone
            if (reserved := memory.peak_reserved_mib(ctx.device)) is not None:
                metrics["variant_peak_reserved_mib"] = reserved  # the talk's figure: the allocator's reserved peak
        else:
            notes.append(f"measured in one process with {len(built) - 1} other arm(s), in interleaved blocks: "
                         "its memory peak is not its own and is not recorded")
        share = recording.energy_share(spent, busy[b.cfg.arm], sum(busy.values()),
                                       b.training.samples * ctx.world_size, len(built))
        out.append(recording.measured(b.cfg, b.trainable, b.loaders, metrics, ctx, run_id, repeat, dist_info,
                                      protocol, notes, machine=state, energy=share, pairing=pairing,
                                      card=process_card))
    return out
