"""Checkpoint files: what one holds, how it is written so that no save cut short is ever read, and which one a
run may resume (`pick`). The loop hooks that save and resume them are train/resume.py.

A checkpoint holds the model's and the optimizer's state, the state of hooks that keep one (a scheduler),
where training goes on (the epoch, and the batches of it already trained), the sampler's (its generator;
inside an epoch, the epoch's sequence and the samples of it trained: data/sampling.py) and every
rank's random state (torch, numpy, `random`), gathered at each save. A resumed run is then the run it
continues, step for step, as long as the data's transforms draw no random numbers in loader workers
(their seeds are drawn at an epoch's start, and a skipped batch is never loaded).

Two are kept: the newest as FILENAME, the one before as PREVIOUS. Each is written by `atomic.write` (a
temporary in the same folder, fsynced, renamed into place) and then given its marker (FILE.json, written the
same way): the run's identity (MANIFEST_KEYS, for a resume to match), where it was taken, whether the ranks
stopped after it for a requeue (`requeue`: interrupt.REQUEUE), and the file's sha256. A file without a marker
whose sha256 matches it is never read, so a save cut short at any point leaves the one before it valid: the
old pair is renamed to PREVIOUS before the new file lands, and a marker finds its file by content, not by
name. A resume reads only a matching, complete pair; another run's checkpoint (another experiment, arm, world
size unless the run accepts any, batch, configuration, data or torch) is refused in one line naming what differs
(for the configuration, its fields: the marker keeps them beside their hash), and so is a folder whose only
checkpoint has no valid marker. Loads use `weights_only=True`, and a file that is not a checkpoint (hostile,
damaged, something else) is one ConfigError line naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.record import atomic
from pipelines.core.record.version import git_commit
from pipelines.core.train import loop
from pipelines.core.errors import ConfigError, WriteError

FILENAME, PREVIOUS = "checkpoint.pt", "checkpoint.prev.pt"
POSITION = "position.json"  # where a failed attempt's training got to after its last save (train/resume.py)
MARKER = ".json"  # FILE + MARKER: its identity and sha256, written after FILE
# What a resume must match; `commit` is kept in the marker, never matched (a requeued job may run a fixed checkout)
MANIFEST_KEYS = ("experiment", "arm", "scale", "repeat", "config", "world_size", "batch_size", "dataset", "data",
                 "torch")
# Fields of the run's configuration that say where output goes or how often it is measured, not what is trained
NOT_IDENTITY = ("data_root", "results_dir", "rounds", "repeats", "auto", "budget_s")


def identity(cfg: RunConfig, world_size: int, repeat: int = 0, data: str = "") -> dict[str, Any]:
    """This run's manifest: what a checkpoint must match to be resumed here (MANIFEST_KEYS), and the commit.
    `data`: the training data's fingerprint (data/datasets.py `fingerprint`: source, size, checksums)."""
    config = {k: v for k, v in cfg.to_record().items() if k not in NOT_IDENTITY}
    config["options"] = {k: v for k, v in config["options"].items() if not k.startswith("checkpoint_")}
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
    fields = {k: v for k, v in config.items() if k != "options"}
    fields.update({f"options.{k}": v for k, v in config["options"].items()})
    fields = {k: json.dumps(v, sort_keys=True, default=str) for k, v in fields.items()}  # named in a refusal
    return {"experiment": cfg.experiment, "arm": cfg.variant, "scale": cfg.scale, "repeat": repeat, "config": digest,
            "world_size": world_size, "batch_size": cfg.batch_size, "dataset": f"{cfg.dataset}/{cfg.split}",
            "data": data,
            "torch": torch.__version__, "commit": git_commit().get("git_commit"), "config_fields": fields}


def _differences(marker: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """What differs between a checkpoint's marker and this run, a phrase each: for the configuration, the
    fields themselves where both sides keep them (`config_fields`), else its hash."""
    out = []
    for key in (k for k in MANIFEST_KEYS if k in manifest and marker.get(k) != manifest[k]
                and (k != "data" or k in marker)):  # markers written before the data fingerprint lack it
        there, here = marker.get("config_fields"), manifest.get("config_fields")
        if key == "config" and isinstance(there, dict) and isinstance(here, dict):
            named = [f"{field} {there.get(field, '-')} there, {here.get(field, '-')} here"
                     for field in sorted(there.keys() | here.keys()) if there.get(field) != here.get(field)]
            if named:
                out += named
                continue
        out.append(f"{key} {marker.get(key)!r} there, {manifest[key]!r} here")
    return out


def rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    return {"torch": torch.get_rng_state(), "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos,
                                                      has_gauss, cached],
            "python": [version, list(internal), gauss]}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def save(path: Path, trainable: loop.Trainable, epoch: int, complete: bool, batch: int = 0,
         sampler_state: dict[str, Any] | None = None, rng_ranks: list | None = None) -> Path:
    """`batch`: batches of `epoch` trained (a mid-epoch checkpoint); `sampler_state`: where the training
    sampler is (train/resume.py: its generator's state and, inside an epoch, the epoch's sequence and how much
    of it was trained); `rng_ranks`: every rank's random state, in rank order (`rng` is this process's)."""
    state = {"model": trainable.model.state_dict(), "epoch": epoch, "batch": batch, "complete": complete,
             "rng": rng_state(), "rng_ranks": rng_ranks, **(sampler_state or {}),
             "optimizer": trainable.optimizer.state_dict() if trainable.optimizer is not None else None,
             "hooks": [hook.state_dict() if hasattr(hook, "state_dict") else None for hook in trainable.hooks]}
    return atomic.write(path, lambda handle: torch.save(state, handle), binary=True)


def load(path: Path) -> dict[str, Any]:
    """The checkpoint's state; ConfigError (one line, the file and why) for anything else."""
    fix = "delete it to start afresh, or point checkpoint_dir at another folder"
    try:
        with warnings.catch_warnings():  # torch warns about the pickle protocol of files it then refuses
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        raise ConfigError(f"checkpoint {path} cannot be loaded ({_why(exc)}); {fix}") from None
    if not isinstance(state, dict) or not {"model", "epoch", "rng"} <= state.keys():
        raise ConfigError(f"{path} is not a checkpoint written by accel (no model, epoch and rng); {fix}")
    return state


def _why(exc: Exception) -> str:
    """torch's reason in one clause, without its advice to load with `weights_only=False`, which would
    run whatever code the file names."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    for line in str(exc).splitlines():
        line = line.replace("WeightsUnpickler error:", "").strip()
        if line and "weights_only" not in line and "documentation" not in line:
            return line.split(". ")[0].rstrip(".")[:200]
    return "empty or truncated" if isinstance(exc, EOFError) else "not a weights-only checkpoint"


def marker_of(path: Path) -> Path:
    return path.with_name(path.name + MARKER)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def keep(folder: Path, trainable: loop.Trainable, epoch: int, complete: bool, manifest: dict[str, Any],
         batch: int = 0, sampler_state: dict[str, Any] | None = None, rng_ranks: list | None = None) -> Path:
    """Write the newest checkpoint and then its marker; the newest pair before it becomes PREVIOUS first."""
    folder = Path(folder)
    newest, previous = folder / FILENAME, folder / PREVIOUS
    if newest.is_file() and marker_of(newest).is_file():  # a marked pair: kept as the one before
        os.replace(newest, previous)
        os.replace(marker_of(newest), marker_of(previous))
    try:
        save(newest, trainable, epoch, complete, batch, sampler_state, rng_ranks)
        marker = {**manifest, "epoch": epoch, "batch": batch, "complete": complete, "saved_ns": time.time_ns(),
                  "sha256": sha256_of(newest)}
        atomic.write_text(marker_of(newest), json.dumps(marker, indent=1) + "\n")
    except WriteError as exc:  # a full disk: the new file has no marker, so only the one before it is read
        kept = f"the one before it, {previous}, is kept and resumable" if marker_of(previous).is_file() else \
            "no earlier checkpoint is kept"
        raise WriteError(f"checkpoint save failed: {exc}; {kept}; free space or point checkpoint_dir "
                         "elsewhere") from None
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)  # the renames, durable before training goes on
    finally:
        os.close(handle)
    return newest


def _vouched(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(file, marker) for each kept file whose sha256 a marker gives, the newest save first."""
    markers = []
    for name in (FILENAME, PREVIOUS):
        try:
            markers.append(json.loads(marker_of(folder / name).read_text()))
        except (OSError, ValueError):
            continue
    found = []
    for path in (folder / FILENAME, folder / PREVIOUS):
        digest = sha256_of(path) if path.is_file() else None
        match = next((m for m in markers if isinstance(m, dict) and digest and m.get("sha256") == digest), None)
        if match is not None:
            found.append((path, match))
    return sorted(found, key=lambda pair: pair[1].get("saved_ns", 0), reverse=True)


def pick(folder: Path, manifest: dict[str, Any], any_world: bool = False) -> tuple[str, dict[str, Any]] | str | None:
    """The newest checkpoint to resume (its file name and marker), None for a fresh start, or the one line
    that refuses the folder: a checkpoint of another run, or checkpoints none of which a marker vouches for.
    `any_world`: a checkpoint of another world size is this run's too (the run then gives no verdict)."""
    folder = Path(folder)
    found = _vouched(folder)
    if not found:
        unmarked = [path for path in (folder / FILENAME, folder / PREVIOUS) if path.is_file()]
        if not unmarked:
            return None
        return (f"checkpoint {unmarked[0]} has no marker that vouches for it (a save cut short, a file from "
                "before markers, or not written by accel), so it is not read; delete it to start afresh, or "
                "point checkpoint_dir at another folder")
    path, marker = found[0]
    if marker.get("complete"):
        return None  # a finished run (whichever): nothing to resume, and this run's saves replace it
    differs = _differences(marker, {k: v for k, v in manifest.items() if not (any_world and k == "world_size")})
    if differs:
        other_world = " or resume it at this world size with -o checkpoint_any_world=true (no verdict then)," \
            if differs[0].startswith("world_size") and len(differs) == 1 else ""
        return (f"checkpoint {path} is of another run ({'; '.join(differs[:3])}); point checkpoint_dir at "
                f"another folder,{other_world} or delete it to start afresh")
    return path.name, marker
