"""The experiment catalog: id -> pipeline, settings, baseline, container target, launcher, published figures.

Entries live in `pipelines/catalog/*.py`, one module per source (book chapters, talk, course, notes),
so the data is plain Python that needs no parser and imports without torch. This module holds the
entry types and the lookup; it knows no chapter by name.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
from dataclasses import InitVar, dataclass, field
from typing import Any, Mapping

TARGETS = ("cpu", "cpu-intel", "cuda", "mpi")
LAUNCHERS = ("local", "torchrun", "mpirun", "srun")
STATUSES = ("ready", "planned")


@dataclass(frozen=True)
class Published:
    """One published figure. `metric` ends in its unit (train_time_s, test_accuracy_pct, ratio)."""

    metric: str
    value: float
    source: str  # "book:ch2", "talk-slides", "repo-output:rasbt/cvpr2023", ...
    note: str = ""
    variant: str | None = None  # which variant of the experiment the figure belongs to


@dataclass(frozen=True)
class Variant:
    """One arm of an experiment (eager vs compiled, a sparsity, a thread count).

    Variants of one experiment run interleaved in one invocation (repeat 0 of every variant, then
    repeat 1, ...), so slow drift of the machine affects all arms alike.
    """

    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)  # RunConfig fields this variant changes
    options: Mapping[str, Any] = field(default_factory=dict)  # pipeline options this variant changes


@dataclass(frozen=True)
class Experiment:
    id: str
    compares: str  # one line: baseline -> variant, as the README map shows it
    pipeline: str | None  # module name under pipelines/, e.g. "grad_accum"
    status: str = "ready"
    baseline: str | None = None
    target: str = "cpu"
    launcher: str = "local"
    settings: Mapping[str, Any] = field(default_factory=dict)  # RunConfig fields at book scale
    options: Mapping[str, Any] = field(default_factory=dict)  # pipeline options
    knobs: Mapping[str, str] = field(default_factory=dict)  # launcher env knobs, e.g. OMP_RUNTIME
    requires: tuple[str, ...] = ()  # capabilities: "gpu", "ipex", "ccl", "mpi-backend", "multi-gpu"
    published: tuple[Published, ...] = ()
    hardware: str = ""  # the hardware of the published run
    expect: str = ""  # what to expect on other hardware, and why (shown by the report)
    decisions: tuple[str, ...] = ()  # known defects of the original and what we chose
    reproduces: str = ""  # the source's table / figure / slide / unit this entry reproduces (the map's column)
    cpu_smoke: tuple[str, ...] = ()  # extra `accel run` args for a quick CPU smoke run (e.g. a tiny stand-in)
    planned_reason: str = ""  # for status "planned": what delivers it
    variants: tuple[Variant, ...] = ()  # the arms; when empty, one Variant named by `variant`
    tolerance: float = 0.15  # relative band around a published ratio inside which the report says "reproduced"
    # Compare each arm with the arm of the baseline experiment that ran on the same total cores (ranks x
    # threads) here, not with the declared baseline arm: the published ratio holds at equal total cores.
    match_cores: bool = False
    variant: InitVar[str] = "default"  # shorthand for a single-variant experiment: its variant's name

    def __post_init__(self, variant: str) -> None:
        if not self.variants:
            object.__setattr__(self, "variants", (Variant(variant),))

    @property
    def has_variants(self) -> bool:
        """True when the experiment compares several variants of its own (not only against a baseline id)."""
        return len(self.variants) > 1

    def published_value(self, metric: str, variant: str | None = None) -> float | None:
        for fig in self.published:
            if fig.metric == metric and fig.variant == variant:
                return fig.value
        return None


def cpu_smoke_args(entry: Experiment) -> list[str]:
    """`accel run` arguments that run a GPU entry's code path on a CPU at smoke scale: what the no-GPU hints
    suggest (tests/test_hints.py runs each one). NCCL has no CPU side, so Gloo stands in for it."""
    args = ["--device", "cpu", "--scale", "smoke"]
    if entry.options.get("backend") == "nccl":
        args += ["-o", "backend=gloo"]
    return [*args, *entry.cpu_smoke]


class UnknownExperiment(KeyError):
    pass


def _load() -> dict[str, Experiment]:
    """Every module's EXPERIMENTS; a module may name what its entries reproduce in one REPRODUCES table
    (id -> text) instead of per entry."""
    package = importlib.import_module("pipelines.catalog")  # its modules import this one: loaded on demand
    entries: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        table = getattr(module, "REPRODUCES", {})
        for entry in getattr(module, "EXPERIMENTS", ()):
            if entry.id in entries:
                raise ValueError(f"experiment id {entry.id!r} is defined twice")
            if not entry.reproduces and entry.id in table:
                entry = dataclasses.replace(entry, reproduces=table[entry.id], variants=entry.variants)
            entries[entry.id] = entry
    return entries


_ENTRIES: dict[str, Experiment] | None = None


def all_experiments() -> dict[str, Experiment]:
    global _ENTRIES
    if _ENTRIES is None:
        _ENTRIES = _load()
    return _ENTRIES


def get(experiment_id: str) -> Experiment:
    entries = all_experiments()
    if experiment_id not in entries:
        close = [e for e in entries if e.split("-")[0] == experiment_id.split("-")[0]][:6]
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise UnknownExperiment(f"unknown experiment id {experiment_id!r}{hint}; "
                                "`accel list` shows every id")
    return entries[experiment_id]


def main() -> None:
    """`python -m pipelines.core.experiments ids|ready|gpu`: id lists for the Makefile and the CI scripts,
    without torch. `gpu`: the ready entries whose target image is cuda (ci/gpu-reference.sh runs them)."""
    which = sys.argv[1] if len(sys.argv) > 1 else "ids"
    for entry in all_experiments().values():
        if which == "ids" or entry.status == which or (which == "gpu" and entry.status == "ready"
                                                       and entry.target == "cuda"):
            print(entry.id)


if __name__ == "__main__":
    main()
