"""Checkpoints as loop hooks: rank 0 writes atomically every N epochs and at the end; every rank resumes.

A checkpoint holds the model's and the optimizer's state, the next epoch to run (which is also the
distributed sampler's state: `set_epoch(epoch)` reproduces its shuffle) and the RNG states of torch,
numpy and `random`. It is written by `atomic.write` (a temporary file in the same folder, renamed into
place), so a rank killed mid-write leaves the previous checkpoint intact and a stale temporary that the
next save removes; a resume reads only the complete file. Loads use `weights_only=True`, and a file that
is not a checkpoint (hostile, damaged, something else) is one ConfigError line naming it.
"""

from __future__ import annotations

import pickle
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipelines.core.record import atomic
from pipelines.core.train import loop
from pipelines.core.errors import ConfigError

FILENAME = "checkpoint.pt"


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


def save(path: Path, trainable: loop.Trainable, epoch: int, complete: bool) -> Path:
    state = {"model": trainable.model.state_dict(), "epoch": epoch, "complete": complete, "rng": rng_state(),
             "optimizer": trainable.optimizer.state_dict() if trainable.optimizer is not None else None}
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


class CheckpointHooks(loop.Hooks):
    """Rank 0 saves every `every` epochs (0: at the end only); every rank resumes from `folder`. A save is
    untimed: the loop pauses the timed window around it (loop.Hooks.timed)."""

    timed = False

    def __init__(self, folder: Path, every: int, is_main: bool, barrier=None):
        self.path = Path(folder) / FILENAME
        self.every, self.is_main, self.barrier = every, is_main, barrier or (lambda: None)
        self.trainable: loop.Trainable | None = None
        self.resumed_from: int | None = None

    def train_start(self, trainable: loop.Trainable, loaders) -> int | None:
        self.trainable = trainable
        if not self.path.is_file():
            return None
        state = load(self.path)
        if state.get("complete"):
            return None  # a finished run: start a new one (its checkpoint is overwritten as it goes)
        trainable.model.load_state_dict(state["model"])
        if trainable.optimizer is not None and state.get("optimizer") is not None:
            trainable.optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        self.resumed_from = int(state["epoch"])
        return self.resumed_from

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        if self.every and (epoch + 1) % self.every == 0:
            self._save(epoch + 1, complete=False)

    def train_end(self, trainable: loop.Trainable, epoch: int) -> None:
        self._save(epoch, complete=True)

    def _save(self, next_epoch: int, complete: bool) -> None:
        if self.is_main and self.trainable is not None:
            save(self.path, self.trainable, next_epoch, complete)
        self.barrier()  # no rank runs ahead of a checkpoint that a restart would need
