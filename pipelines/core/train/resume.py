"""Checkpoints as loop hooks: rank 0 writes every N epochs, after every K batches of an epoch, and at the
end (train/checkpoint.py's files); every rank resumes from the newest valid checkpoint of this run, which
rank 0 picks and every rank is told, inside the epoch where it was taken there, with the training sampler
fast-forwarded past the batches already trained (data/sampling.py). At every save each rank hands rank 0
its random state and whether it was asked to stop for a requeue (train/interrupt.py's REQUEUE); when any
was, every rank stops right after that save.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pipelines.core.errors import ConfigError
from pipelines.core.train import interrupt, loop, progress
from pipelines.core.train.checkpoint import (FILENAME, PREVIOUS, keep, load, pick, rng_state, set_rng_state,
                                             sha256_of)


class CheckpointHooks(loop.Hooks):
    """Rank 0 saves every `every` epochs (0: at the end only) and, with `every_steps`, after every that many
    batches of an epoch; every rank resumes from `folder`, from the checkpoint rank 0 picked (`agree`: rank
    0's value on every rank), inside its epoch where it was taken there. A save is untimed: the loop pauses
    the timed window around it (loop.Hooks.timed)."""

    timed = False

    def __init__(self, folder: Path, every: int, is_main: bool, barrier=None, manifest=None, agree=None,
                 every_steps: int = 0, rank: int = 0, gather=None):
        self.folder, self.path = Path(folder), Path(folder) / FILENAME
        self.every, self.every_steps, self.is_main, self.rank = every, every_steps, is_main, rank
        self.barrier, self.agree = barrier or (lambda: None), agree or (lambda value: value)
        self.gather = gather or (lambda value: [value])  # every rank's value, in rank order (a collective)
        self.manifest = dict(manifest or {})
        self.trainable: loop.Trainable | None = None
        self.sampler = None  # the training loader's
        self.resumed_from: int | None = None
        self.resumed: dict[str, Any] | None = None

    def train_start(self, trainable: loop.Trainable, loaders) -> int | None:
        self.trainable = trainable
        train = getattr(loaders, "train", None)
        self.sampler = getattr(train, "sampler", None)
        picked = self.agree(pick(self.folder, self.manifest) if self.is_main else None)
        if isinstance(picked, str):
            raise ConfigError(picked)
        if picked is None:
            return None  # nothing to resume, or a finished run: start a new one
        name, marker = picked
        path = self.folder / name
        if not path.is_file() or sha256_of(path) != marker["sha256"]:  # this rank sees another file
            raise ConfigError(f"checkpoint {path}, which rank 0 resumes from, is missing or differs on this host; "
                              "point checkpoint_dir at a folder every rank shares")
        state = load(path)
        trainable.model.load_state_dict(state["model"])
        if trainable.optimizer is not None and state.get("optimizer") is not None:
            trainable.optimizer.load_state_dict(state["optimizer"])
        for hook, kept in zip(trainable.hooks, state.get("hooks") or []):  # a scheduler's steps
            if kept is not None and hasattr(hook, "load_state_dict"):
                hook.load_state_dict(kept)
        ranks = state.get("rng_ranks") or []
        set_rng_state(ranks[self.rank] if self.rank < len(ranks) else state["rng"])  # this rank's own draws
        self.resumed_from, self.resume_batches = int(state["epoch"]), int(state.get("batch", 0))
        self._position_sampler(path, state, getattr(train, "batch_size", None))
        since = (time.time_ns() - marker.get("saved_ns", time.time_ns())) / 1e9  # lost work and the restart
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)  # torchrun's restarts of this agent
        self.resumed = {"checkpoint": str(path), "epoch": self.resumed_from, "batch": self.resume_batches,
                        "previous_run": marker.get("run_id"), "commit": marker.get("commit"), "attempt": attempt,
                        "since_save_s": round(since, 3), "lost_at_most": self._interval()}
        skipped = ""
        if name == PREVIOUS and self.path.is_file():  # the newest file is no marker's: cut short or corrupt
            self.resumed["skipped"] = str(self.path)
            skipped = f"; {self.path} skipped: no marker vouches for it (a save cut short, or corrupt)"
        if self.is_main:
            where = f"epoch {self.resumed_from}" + (f", batch {self.resume_batches}" if self.resume_batches else "")
            progress.say(f"accel: resumed from {path} at {where} (attempt {attempt}; saved {since:.0f} s ago: "
                         f"the work since then, at most {self.resumed['lost_at_most']}, and the restart are "
                         f"lost{skipped})")
        return self.resumed_from

    def _interval(self) -> str:
        """The most work a lost host costs: the time since the last save, at most one interval."""
        if self.every_steps:
            return f"{self.every_steps} batches"
        return f"{self.every} epoch{'s' if self.every > 1 else ''}" if self.every else "the whole run"

    def _position_sampler(self, path: Path, state: dict[str, Any], batch_size: int | None) -> None:
        """The training sampler where the checkpoint left it: its generator's state, and inside an epoch the
        batches it skips, over the epoch's kept order where its own cannot be drawn again."""
        if state.get("sampler_rng") is not None and getattr(self.sampler, "generator", None) is not None:
            self.sampler.generator.set_state(state["sampler_rng"])
        if not self.resume_batches:
            return
        order = state.get("order")
        if not hasattr(self.sampler, "fast_forward") or not batch_size or \
                (order is None and not self.sampler.deterministic):
            raise ConfigError(f"checkpoint {path} was taken inside epoch {self.resumed_from} (after batch "
                              f"{self.resume_batches}), and this run's training loader cannot start inside an "
                              "epoch; resume it with the run that wrote it")
        self.sampler.fast_forward(self.resume_batches, batch_size, None if order is None else order.tolist())

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        if self.every and (epoch + 1) % self.every == 0:
            self._save(epoch + 1, complete=False)

    def mid_epoch(self, epoch: int, batches: int) -> None:
        self._save(epoch, complete=False, batch=batches)

    def train_end(self, trainable: loop.Trainable, epoch: int) -> None:
        self._save(epoch, complete=True)
        if self.resumed is not None:
            trainable.metrics["resumed_from"] = self.resumed

    def _save(self, next_epoch: int, complete: bool, batch: int = 0) -> None:
        """Rank 0 writes; every rank hands it its random state and whether it was asked to stop for a
        requeue (interrupt.REQUEUE), so all ranks stop after the same save when any was asked."""
        gathered = self.gather((rng_state(), interrupt.requeue_asked()))  # every rank takes part
        stop = not complete and any(asked for _, asked in gathered)
        if self.is_main and self.trainable is not None:
            keep(self.folder, self.trainable, next_epoch, complete, {**self.manifest, "requeue": stop}, batch,
                 self.sampler, [state for state, _ in gathered])
        self.barrier()  # no rank runs ahead of a checkpoint that a restart would need
        if stop:
            raise interrupt.Interrupted(interrupt.REQUEUE, checkpoint=f"{self.path} at epoch {next_epoch}, "
                                                                      f"batch {batch}")
