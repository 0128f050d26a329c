"""What the engine (harness/execute.py) writes: one record per arm and unit, and the result file kept after
every unit.

`measured` builds the record of an arm that ran: its Training's metrics (train/loop.py), evaluation on
rank 0, the technique's metrics and notes, the data it trained on, the machine around the unit, its energy
and its pairing. `record_of` builds one without measurements (skipped, error); `interrupted` the record of
an arm a signal stopped, saying how far it got. `keep` writes the file atomically and indexes it in the
folder's history store.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pipelines.core.config.request import Pairing
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.data import datasets
from pipelines.core.record import envinfo, history, results
from pipelines.core.train import evaluation, loop, models, progress

PROTOCOLS = {  # a record's `protocol`: how its timed steps were taken
    "blocks": "time-matched blocks, interleaved with the process's other arms (a carry-over balanced order, "
              "a dropped step per switch)",
    "window": "one timed window after the warm-up",
}


def pairing_mark(run_id: str, pairing: Pairing | None) -> dict[str, Any]:
    """Which comparison, round and process this process is (its records carry it as `pairing`): the request's
    (config/request.py), or, for a process that is no comparison's, a comparison of its own, round 0."""
    if pairing is None:
        return {"comparison": run_id, "round": 0, "process": run_id}
    return {"comparison": pairing.comparison, "round": pairing.round, "process": pairing.process}


def record_of(status: str, cfg: RunConfig, run_id: str, repeat: int, dist_info, **extra) -> dict[str, Any]:
    """A record without measurements (skipped, error); `extra` carries its error, notes or pairing."""
    return results.make_record(status=status, run_id=run_id, config=cfg.to_record(), repeat=repeat, metrics={},
                               dist=dist_info, env=envinfo.fingerprint(), **extra)


def interrupted(cfg: RunConfig, run_id: str, repeat: int, dist_info, signal_name: str,
                how: progress.RepeatProgress, **extra) -> dict[str, Any]:
    """The record of an arm a signal stopped: how far it got, never a measurement to compare."""
    far = how.how_far()
    steps_of = f" of {far['steps_planned']}" if far["steps_planned"] else ""
    epochs = f", {far['epochs_done']} of {far['epochs_planned']} epochs" if far["epochs_planned"] else ""
    note = f"interrupted by {signal_name} after {far['steps_done']}{steps_of} steps{epochs}"
    return results.make_record(status="interrupted", run_id=run_id, config=cfg.to_record(), repeat=repeat,
                               metrics=far, dist=dist_info, env=envinfo.fingerprint(), notes=[note], **extra)


def measured(cfg: RunConfig, trainable: loop.Trainable, loaders: datasets.Loaders, metrics: dict[str, Any],
             ctx: loop.RunContext, run_id: str, repeat: int, dist_info, protocol: str, engine_notes: list[str],
             **extra) -> dict[str, Any]:
    """The record of an arm that ran: `metrics` (its Training's, plus what the engine adds), evaluation on
    rank 0, the technique's metrics, notes (the `engine_notes` last) and artifacts;
    `extra`: machine, energy, pairing."""
    if ctx.is_main:
        metrics.update(evaluation.evaluate(trainable, loaders.test, cfg, ctx))
    metrics["parameters"] = models.parameter_count(trainable.model)
    metrics["steps_per_epoch"] = len(loaders.train)  # this rank's batches an epoch: the split, batch and ranks
    metrics.update(trainable.metrics)
    notes = [*trainable.notes, *unvalidated(cfg, loaders, metrics)]
    if cfg.pin_memory and ctx.device.type != "cuda":
        notes.append("pin_memory=True has no effect without a GPU: page-locked buffers only speed "
                     "host-to-GPU copies")
    notes += engine_notes
    env = envinfo.fingerprint()
    if protocol == "blocks":
        env["python_gc_in_timed_steps"] = "paused (collected before each block)"
    return results.make_record(status="ok", run_id=run_id, config={**cfg.to_record(), **data_facts(loaders)},
                               repeat=repeat, metrics=metrics, dist=dist_info, env=env,
                               artifacts=trainable.artifacts, notes=notes, protocol=protocol, **extra)


def measurement(cfg: RunConfig, done, loaders: datasets.Loaders, run_id: str, repeat: int, dist_info,
                **extra) -> dict[str, Any]:
    """The record of a Measurement (a profile, a search): its own metrics and artifacts, one window."""
    return results.make_record(status="ok", run_id=run_id, config={**cfg.to_record(), **data_facts(loaders)},
                               repeat=repeat, metrics=done.metrics, dist=dist_info, env=envinfo.fingerprint(),
                               artifacts=done.artifacts, notes=unvalidated(cfg, loaders, done.metrics),
                               protocol="window", **extra)


def samples_trained(metrics: dict[str, Any]) -> int:
    """Samples a measurement's steps went through, warm-up included (what its energy is shared over)."""
    return int((metrics.get("samples_per_step") or 0) * ((metrics.get("warmup_steps") or 0)
                                                         + (metrics.get("measured_steps") or 0)))


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


def energy_share(spent: dict[str, Any], busy_s: float, total_s: float, samples: int, arms: int) -> dict[str, Any]:
    """A unit's joules shared out by each arm's time in it (warm-up, dropped and timed steps)."""
    if not spent.get("measured") or arms == 1:
        return spent
    joules = spent["joules"] * busy_s / (total_s or 1.0)
    return {"measured": True, "joules": round(joules, 3), "joules_per_sample": round(joules / samples, 6)
            if samples else None, "shared": f"the process's {spent['joules']} J shared out by time over "
            f"{arms} arm(s)"}


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
