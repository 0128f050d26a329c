"""Checkpoints as loop hooks: rank 0 writes every N epochs, after every K batches of an epoch, and at the
end (train/checkpoint.py's files); every rank resumes from the newest valid checkpoint of this run, which
rank 0 picks and every rank is told, inside the epoch where it was taken there, with the training sampler
going on with the rest of that epoch's kept sequence (data/sampling.py). A checkpoint of another world size
is refused unless the run accepts one (`any_world`): the rest of the epoch is then shared out over this
run's ranks, none skipped and none twice, and the record says which world size it resumed from (the verdict
is withheld: stats/judging.py). At every save each rank hands rank 0 its random state and whether it was
asked to stop for a requeue (train/interrupt.py's REQUEUE); when any was, every rank stops right after that
save.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from pipelines.core.errors import ConfigError, WriteError
from pipelines.core.record import atomic
from pipelines.core.train import interrupt, loop, progress
from pipelines.core.train.checkpoint import (FILENAME, POSITION, PREVIOUS, keep, load, pick, rng_state, set_rng_state,
                                             sha256_of)


class CheckpointHooks(loop.Hooks):
    """Rank 0 saves every `every` epochs (0: at the end only) and, with `every_steps`, after every that many
    batches of an epoch; every rank resumes from `folder`, from the checkpoint rank 0 picked (`agree`: rank
    0's value on every rank), inside its epoch where it was taken there. A save is untimed: the loop pauses
    the timed window around it (loop.Hooks.timed)."""

    timed = False

    def __init__(self, folder: Path, every: int, is_main: bool, barrier=None, manifest=None, agree=None,
                 every_steps: int = 0, rank: int = 0, gather=None, any_world: bool = False):
        self.folder, self.path = Path(folder), Path(folder) / FILENAME
        self.every, self.every_steps, self.is_main, self.rank = every, every_steps, is_main, rank
        self.barrier, self.agree = barrier or (lambda: None), agree or (lambda value: value)
        self.gather = gather or (lambda value: [value])  # every rank's value, in rank order (a collective)
        self.manifest, self.any_world = dict(manifest or {}), any_world
        self.trainable: loop.Trainable | None = None
        self.sampler, self.batch_size, self.loader_batches = None, None, 0  # the training loader's
        self.resumed_from: int | None = None
        self.resumed: dict[str, Any] | None = None
        self.saved: list[int] | None = None  # (epoch, batch) of the last save this rank took part in, or resumed
        self.reached: list[int] | None = None  # (epoch, batches of it trained) now
        self.first_on_host = os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")) == "0"

    def train_start(self, trainable: loop.Trainable, loaders) -> int | None:
        self.trainable = trainable
        train = getattr(loaders, "train", None)
        self.sampler, self.batch_size = getattr(train, "sampler", None), getattr(train, "batch_size", None)
        self.loader_batches = len(train) if hasattr(train, "__len__") else 0
        picked = self.agree(pick(self.folder, self.manifest, self.any_world) if self.is_main else None)
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
        batch, world = self.resume_batches, int(marker.get("world_size") or self.manifest.get("world_size") or 1)
        self._position_sampler(path, state, world)
        self.saved = [self.resumed_from, self.resume_batches]  # in this run's batches (another world size: others)
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)  # torchrun's restarts of this agent
        self.resumed = {"checkpoint": str(path), "epoch": self.resumed_from, "batch": batch,
                        "previous_run": marker.get("run_id"), "commit": marker.get("commit"), "attempt": attempt,
                        "lost_at_most": self._interval(), "world_size": world,
                        **self._lost(marker, self.is_main and self._left_position())}
        where = f"epoch {self.resumed_from}" + (f", batch {batch}" if batch else "")
        if world != self.manifest.get("world_size", world):
            where += (f" of {world} ranks, on {self.manifest['world_size']} (the rest of the epoch shared out "
                      "again; no verdict)")
        if name == PREVIOUS and self.path.is_file():  # the newest file is no marker's: cut short or corrupt
            self.resumed["skipped"] = str(self.path)
            where += f"; {self.path} skipped: no marker vouches for it (a save cut short, or corrupt)"
        if self.is_main:
            progress.say(f"accel: resumed from {path} at {where} (attempt {attempt}; {self._lost_text()})")
        return self.resumed_from

    def _lost(self, marker: dict[str, Any], left: dict[str, Any] | None) -> dict[str, Any]:
        """What the resume lost: the time since the save (the work after it and the restart), and, where a
        process of the failed attempt left its position (`left`: POSITION, written as it failed, after this
        save), the batches and samples trained after the save, the seconds from the save to the failure
        (`lost_s`) and from the failure to this resume (`restart_s`)."""
        now = time.time_ns()
        lost: dict[str, Any] = {"since_save_s": round((now - marker.get("saved_ns", now)) / 1e9, 3)}
        if left and left.get("saved") == [marker.get("epoch"), marker.get("batch")] and \
                all(left.get(k) == marker.get(k) for k in ("experiment", "arm", "repeat", "config")):
            (epoch, batch), (to_epoch, to_batch) = left["saved"], left["reached"]
            steps = (to_epoch - epoch) * left["batches_per_epoch"] + to_batch - batch
            lost.update(lost_steps=steps, lost_samples=steps * left["batch_size"] * left["world_size"],
                        lost_s=round((left["written_ns"] - marker["saved_ns"]) / 1e9, 3),
                        restart_s=round((now - left["written_ns"]) / 1e9, 3))
        return lost

    def _lost_text(self) -> str:
        lost = self.resumed or {}
        if "lost_steps" in lost:
            return (f"lost {lost['lost_steps']} batches ({lost['lost_samples']} samples) trained after the save, "
                    f"{lost['lost_s']:.1f} s from the save to the failure, and {lost['restart_s']:.0f} s to restart")
        return (f"saved {lost.get('since_save_s', 0):.0f} s ago: the work since then, at most {self._interval()}, "
                "and the restart are lost")

    def _left_position(self) -> dict[str, Any] | None:
        """The failed attempt's position (POSITION), read once: a later failure writes its own."""
        path = self.folder / POSITION
        try:
            left = json.loads(path.read_text())
            path.unlink()
        except (OSError, ValueError):
            return None
        return left if isinstance(left, dict) else None

    def epoch_start(self, epoch: int) -> None:
        self.reached = [epoch, self.resume_batches if self.reached is None else 0]

    def step_end(self, done: int) -> None:
        if self.reached is not None:
            self.reached[1] += 1

    def leave_position(self) -> None:
        """As this process fails or is stopped: where training got to after the last save it took part in
        (POSITION), so the resume can say exactly what was lost. Written by the first process of each host
        (one that survives the failure), atomically; a host lost with every process writes nothing."""
        if not self.first_on_host or self.saved is None or self.reached is None or not self.loader_batches:
            return
        identity = {k: self.manifest.get(k) for k in ("experiment", "arm", "repeat", "config")}
        try:
            atomic.write_text(self.folder / POSITION, json.dumps(
                {**identity, "saved": self.saved, "reached": self.reached, "batches_per_epoch": self.loader_batches,
                 "batch_size": self.batch_size, "world_size": self.manifest.get("world_size", 1),
                 "written_ns": time.time_ns()}) + "\n")
        except WriteError:  # the failure being handled matters more; the resume then gives the bound instead
            pass

    def _interval(self) -> str:
        """The most work a lost host costs: the time since the last save, at most one interval."""
        if self.every_steps:
            return f"{self.every_steps} batches"
        return f"{self.every} epoch{'s' if self.every > 1 else ''}" if self.every else "the whole run"

    def _position_sampler(self, path: Path, state: dict[str, Any], world: int) -> None:
        """The training sampler where the checkpoint left it: its generator's state, and inside an epoch the
        rest of the epoch's kept sequence, shared out over this run's ranks (`world`: the checkpoint's)."""
        if state.get("sampler_rng") is not None and getattr(self.sampler, "generator", None) is not None:
            self.sampler.generator.set_state(state["sampler_rng"])
        if not self.resume_batches:
            return
        sequence = state.get("sequence", state.get("order"))  # "order": a world-size-1 checkpoint's, before sequences
        if sequence is None and getattr(self.sampler, "world", 1) == world > 1:  # a DistributedSampler's, drawn again
            self.sampler.set_epoch(self.resumed_from)
            sequence = torch.tensor(self.sampler.sequence())
        if not hasattr(self.sampler, "resume") or not self.batch_size or sequence is None:
            raise ConfigError(f"checkpoint {path} was taken inside epoch {self.resumed_from} (after batch "
                              f"{self.resume_batches}), and this run's training loader cannot start inside an "
                              "epoch; resume it with the run that wrote it")
        consumed = int(state.get("consumed", self.resume_batches * self.batch_size * world))
        self.resume_batches = self.sampler.resume(sequence.tolist(), consumed, self.batch_size)

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        if self.every and (epoch + 1) % self.every == 0:
            self._save(epoch + 1, complete=False)

    def mid_epoch(self, epoch: int, batches: int) -> None:
        self._save(epoch, complete=False, batch=batches)

    def train_end(self, trainable: loop.Trainable, epoch: int) -> None:
        self._save(epoch, complete=True)
        if self.resumed is not None:
            trainable.metrics["resumed_from"] = self.resumed

    def _sampler_state(self, batch: int) -> dict[str, Any]:
        """What a resume needs of the training sampler: its generator, and inside an epoch the epoch's sequence
        and the samples of it the ranks trained (data/sampling.py)."""
        state: dict[str, Any] = {}
        if getattr(self.sampler, "generator", None) is not None:
            state["sampler_rng"] = self.sampler.generator.get_state()
        if batch and hasattr(self.sampler, "sequence") and self.batch_size:
            state["sequence"] = torch.tensor(self.sampler.sequence(), dtype=torch.int64)
            state["consumed"] = self.sampler.consumed(batch, self.batch_size)
        return state

    def _save(self, next_epoch: int, complete: bool, batch: int = 0) -> None:
        """Rank 0 writes; every rank hands it its random state and whether it was asked to stop for a
        requeue (interrupt.REQUEUE), so all ranks stop after the same save when any was asked."""
        gathered = self.gather((rng_state(), interrupt.requeue_asked()))  # every rank takes part
        stop = not complete and any(asked for _, asked in gathered)
        if self.is_main and self.trainable is not None:
            keep(self.folder, self.trainable, next_epoch, complete, {**self.manifest, "requeue": stop}, batch,
                 self._sampler_state(batch), [state for state, _ in gathered])
        self.barrier()  # no rank runs ahead of a checkpoint that a restart would need
        self.saved = [next_epoch, batch]  # kept: rank 0 got past its save (a failed one never reaches here)
        if stop:
            raise interrupt.Interrupted(interrupt.REQUEUE, checkpoint=f"{self.path} at epoch {next_epoch}, "
                                                                      f"batch {batch}")
