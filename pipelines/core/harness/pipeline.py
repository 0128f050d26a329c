"""The pipeline contract: what a technique file provides, and the only things the runner calls on it.

A technique file `pipelines/<name>.py` imports its contract from this module in one line (`__all__`: the
kinds, the declarations, `Trainable`, the option groups, the refusals), defines a subclass and exposes one
instance as `PIPELINE`:

    class Pruning(TrainingPipeline):
        Options = PruningOptions              # a frozen dataclass of typed knobs (core/config/options.py)
        supports = Supports(...)              # optional: devices, collective backends, checkpoints
        needs = (Needs(why, when={...}, device="cuda"), ...)  # optional: what some arms need to run
        process_options = ("matmul_precision",)  # optional: options that hold for the whole process
        def setup(self, cfg, ctx):            # build model + step -> Trainable (the technique)
        def check(self, cfg, ctx):            # optional: refuse bad settings before any work
        def skip(self, cfg, ctx):             # optional: a skip no declaration can say (a CPU's ISA)
        def before_training(self, trainable, prep, cfg, ctx):  # optional: e.g. prune after warm-up

Each method reads its options from `cfg.options` (an instance of the pipeline's `Options`), once.

The runner owns everything else for every pipeline: data and loaders, seeds, repeats, the loop and its
clocks, evaluation (rank 0), checkpoints, ranks, results, torch's process-wide settings (it applies the
declared `process_options` and restores torch's state after each arm), and the words of every skip: a
declared `Needs` becomes one line with the command that runs the arm where it can (harness/refusals.py).
No pipeline runs the loop or evaluates itself; `before_training` gets a `Preparation` whose `train` runs
the shared loop untimed.

A `Measurement` is the other kind: a measurement that is not a training run (a profile of one forward
pass, a batch-size search). Its `measure` returns the metrics and artifacts for the record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Generic, Mapping

import torch

from pipelines.core.config.runconfig import O, RunConfig
from pipelines.core.data.datasets import Loaders
from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.train.loop import Hooks, RunContext, Trainable
from pipelines.core.config.options import BookkeepingOptions, CheckpointOptions, DistOptions, NoOptions

# The contract a technique file imports, in one line: the kinds, declarations, what `setup` returns, the
# option groups its Options may inherit and the refusals its `check` raises.
__all__ = ["BACKENDS", "BookkeepingOptions", "CheckpointOptions", "ConfigError", "DistOptions", "Hooks",
           "Measured", "Measurement", "Needs", "NotRunnable", "Preparation", "RunContext", "Supports", "Trainable",
           "TrainingPipeline"]


@dataclass
class Preparation:
    """What `before_training` may use: the run's loaders, one batch, and an untimed run of the loop."""

    loaders: Loaders
    ctx: RunContext
    train: Callable[[Trainable], dict[str, Any]]  # the shared loop, untimed, for the warm-up budget

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = next(iter(self.loaders.train))
        return x.to(self.ctx.device), y.to(self.ctx.device)


@dataclass
class Measured:
    """A Measurement's result: metrics (keys end in their unit) and artifacts (tables, curves)."""

    metrics: dict[str, Any]
    artifacts: dict[str, Any] = field(default_factory=dict)


BACKENDS = ("gloo", "ccl", "nccl", "mpi")  # every collective backend a Session can join (distributed/backends.py)


@dataclass(frozen=True)
class Needs:
    """What some arms need to run, declared: the arms whose options match `when` (every arm when it is
    empty; a tuple matches any of its values) run only where the rest holds. Elsewhere they are skipped,
    with `why` (the technique's reason, in its own words) and the command that runs them where they can,
    which the harness writes (harness/refusals.py `declared_skip`)."""

    why: str
    when: Mapping[str, Any] = field(default_factory=dict)
    device: str | None = None  # "cuda": these arms measure a CUDA technique
    bf16: bool = False  # on CUDA: a GPU with bf16 arithmetic (Ampere or newer)
    min_ranks: int = 1  # processes at least (a technique that splits work across ranks)
    max_ranks: int | None = None  # processes at most (1: a one-process arm)
    ranks_option: str | None = None  # the option holding the exact process count the arm is sized for (0: any)
    module: str | None = None  # a Python package that must be installed (an optional extra)
    collectives: tuple[str, ...] = ()  # what these arms call on the group (a backend lacking one cannot run them)

    def selects(self, options: Any) -> bool:
        return all(getattr(options, name) in (value if isinstance(value, tuple) else (value,))
                   for name, value in self.when.items())


@dataclass(frozen=True)
class Supports:
    """What a pipeline can do, in its own words: the runner reads this, never the classes its Options
    inherit. A pipeline may narrow what its Options allow (a backend its technique cannot use); the option
    groups its Options inherit must be backed by a declaration (tests/unit/test_catalog.py checks both ways).
    """

    devices: tuple[str, ...] = ("cpu", "cuda")  # what --device may name
    backends: tuple[str, ...] = ()  # collective backends of a multi-process run (-o backend); (): one process
    checkpoints: bool = False  # the runner's checkpoint hooks and resume (-o checkpoint_dir, checkpoint_every)


class Pipeline(Generic[O]):
    """Shared by both kinds: typed options, smoke-scale settings, what it supports, and the optional
    refusals. Every method gets the arm's RunConfig, whose `options` is an instance of `Options`."""

    Options: ClassVar[type] = NoOptions
    supports: ClassVar[Supports] = Supports()
    needs: ClassVar[tuple[Needs, ...]] = ()  # what some arms need to run (else: skipped, in the harness's words)
    smoke_settings: ClassVar[Mapping[str, Any]] = {}  # RunConfig settings at smoke scale (e.g. a tiny model)
    # Options whose value holds for the whole process once one arm sets it (torch.set_num_threads, matmul
    # precision, cuDNN flags): arms that differ in one never share a process (core/harness/sharing.py).
    process_options: ClassVar[tuple[str, ...]] = ()
    # True when the pipeline measures its arm's memory apart from the process (autograd's saved tensors),
    # so arms of an entry with a memory figure may still share a process.
    separable_memory: ClassVar[bool] = False

    def check(self, cfg: RunConfig[O], ctx: RunContext) -> None:
        """Raise ConfigError / NotRunnable for a combination that cannot work, before any work."""

    def skip(self, cfg: RunConfig[O], ctx: RunContext) -> str | None:
        """Why this variant cannot run here when no `Needs` can say it (a CPU's instruction set, a relation
        between two options), or None: the arm gets a `skipped` record."""
        return None

    def process_values(self, cfg: RunConfig[O]) -> tuple[tuple[str, Any], ...]:
        """The process-wide options' values for this arm (core/harness/sharing.py): arms that differ in one never
        share a process. A pipeline whose settings only matter on some devices narrows it."""
        opts = cfg.options
        return tuple((name, getattr(opts, name, None)) for name in self.process_options)

    def transforms(self, cfg: RunConfig[O]) -> tuple[Callable, Callable] | None:
        """(train, test) input transforms when the technique is the input pipeline; None: the default."""
        return None


class TrainingPipeline(Pipeline[O]):
    """A training technique run by the shared loop."""

    def setup(self, cfg: RunConfig[O], ctx: RunContext) -> Trainable:
        raise NotImplementedError

    def before_training(self, trainable: Trainable, prep: Preparation, cfg: RunConfig[O],
                        ctx: RunContext) -> Trainable:
        """Transform the model before the timed run (e.g. prune it after a warm-up); default: unchanged."""
        return trainable


class Measurement(Pipeline[O]):
    """A measurement that is not a training run."""

    def measure(self, cfg: RunConfig[O], ctx: RunContext, loaders: Loaders) -> Measured:
        raise NotImplementedError


def warmup_config(cfg: RunConfig[O]) -> RunConfig[O]:
    """The untimed preparation budget: one epoch at book scale, else as many steps as the timed run."""
    return dataclasses.replace(cfg, warmup_steps=0, epochs=1)
